// Global-norm gradient clipping on the GPU (clip_kernels.cu): the sum of squares is read by the
// kernel and the norm written by it, so clipping never waits for the host.
#include "hourglass/backend/gpu/clip_kernels.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

Tensor GpuBackend::clip_grads_(Tensor& grads, const Tensor& sum_squares, double max_norm) {
  Tensor norm = Tensor::empty({}, DType::F32, grads.device());
  gpu::launch_clip_grads(static_cast<float*>(grads.data_ptr()), grads.numel(),
                         static_cast<const float*>(sum_squares.data_ptr()), max_norm,
                         static_cast<float*>(norm.data_ptr()), gpu::stream_for(grads));
  return norm;
}

}  // namespace hg
