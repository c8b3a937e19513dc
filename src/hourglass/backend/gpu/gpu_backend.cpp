// The process's one GPU backend object. Its methods are defined one op per file in this
// folder; it holds no state (streams live per device in the runtime, library handles in the
// dnn and blas wrappers), so one object serves every GPU.
#include "hourglass/backend/gpu/gpu_backend.h"

#include <cstdlib>
#include <cstring>

#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/library_prefetch.h"
#include "hourglass/base/environment.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg {

namespace {

// The vendor libraries' first use (cuDNN's engine library, cuBLASLt's kernels: about 0.2 s of
// a first training step on an H200 host, bench/README.md) paid here, on the start-up's device
// thread, by one small bf16 convolution and one small product. Best effort:
// HOURGLASS_WARM_LIBRARIES=0 leaves it out, and a failure only logs (the run's first
// convolution then reports it).
void warm_libraries(GpuBackend& backend, Device device) {
  if (!env::on_unless_zero("HOURGLASS_WARM_LIBRARIES")) return;
  try {
    const Tensor x = Tensor::zeros({1, 8, 8, 16}, DType::BF16, device);
    const Tensor w = Tensor::zeros({16, 3, 3, 16}, DType::BF16, device);
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    (void)backend.conv2d(x, w, Tensor(), p);
    const Tensor a = Tensor::zeros({16, 16}, DType::BF16, device);
    (void)backend.linear(a, a, Tensor());
    gpu::synchronize(device.index);
  } catch (const Error& e) {
    HG_LOG_DEBUG("warming the GPU libraries up failed: {}", e.one_line());
  }
}

}  // namespace

void GpuBackend::prepare(Device device) {
  gpu::prefetch_vendor_libraries();
  gpu::dnn::prepare(device.index);
  gpu::blas::prepare(device.index);
  warm_libraries(*this, device);
}

Backend& gpu_backend() {
  static GpuBackend backend;
  return backend;
}

}  // namespace hg
