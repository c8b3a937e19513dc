// The side stream's test delay (side_stream_kernels.h): one thread spinning on the clock.
#include "hourglass/backend/gpu/side_stream_kernels.h"

namespace hg::gpu {

namespace {
__global__ void spin_kernel(int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
}  // namespace

void launch_spin(int64_t cycles, gpuStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(cycles);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
