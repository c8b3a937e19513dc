#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

Tensor CpuBackend::sum(const Tensor& x) {
  HG_ASSERT(false, "cpu sum: not implemented yet");
}

Tensor CpuBackend::sum_squares(const Tensor& x) {
  HG_ASSERT(false, "cpu sum_squares: not implemented yet");
}

}  // namespace hg
