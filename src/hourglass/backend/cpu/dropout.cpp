#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

ops::DropoutForward CpuBackend::dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  HG_ASSERT(false, "cpu dropout: not implemented yet");
}

Tensor CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask, double p) {
  HG_ASSERT(false, "cpu dropout_backward: not implemented yet");
}

}  // namespace hg
