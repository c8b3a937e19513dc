#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

ops::MaxPoolForward CpuBackend::max_pool2d(const Tensor& x, const Pool2dParams& p) {
  HG_ASSERT(false, "cpu max_pool2d: not implemented yet");
}

Tensor CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& x, const Tensor& workspace, const Pool2dParams& p) {
  HG_ASSERT(false, "cpu max_pool2d_backward: not implemented yet");
}

Tensor CpuBackend::avg_pool2d(const Tensor& x, const Pool2dParams& p) {
  HG_ASSERT(false, "cpu avg_pool2d: not implemented yet");
}

Tensor CpuBackend::avg_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2dParams& p) {
  HG_ASSERT(false, "cpu avg_pool2d_backward: not implemented yet");
}

Tensor CpuBackend::global_avg_pool(const Tensor& x) {
  HG_ASSERT(false, "cpu global_avg_pool: not implemented yet");
}

Tensor CpuBackend::global_avg_pool_backward(const Tensor& dy, const Tensor& x) {
  HG_ASSERT(false, "cpu global_avg_pool_backward: not implemented yet");
}

}  // namespace hg
