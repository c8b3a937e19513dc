#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

void CpuBackend::sgd_step(Tensor& params, const Tensor& grads, Tensor& momentum, const SgdOptions& o, bool first_step) {
  HG_ASSERT(false, "cpu sgd_step: not implemented yet");
}

void CpuBackend::adamw_step(Tensor& params, const Tensor& grads, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWOptions& o, int64_t step) {
  HG_ASSERT(false, "cpu adamw_step: not implemented yet");
}

}  // namespace hg
