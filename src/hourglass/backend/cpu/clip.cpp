// Global-norm gradient clipping on the CPU (torch.nn.utils.clip_grad_norm_, L2): the norm and
// the coefficient in double from the f32 sum of squares, the scaling as mul_scalar_ does it
// (one f32 multiply by the coefficient rounded to f32), so the result is bit-identical to
// scaling by a coefficient computed on the host.
#include <cmath>

#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

Tensor CpuBackend::clip_grads_(Tensor& grads, const Tensor& sum_squares, double max_norm) {
  const double total = std::sqrt(sum_squares.item());
  // PyTorch adds 1e-6 to the norm before dividing, so a zero gradient never divides by zero.
  const double coef = max_norm / (total + 1e-6);
  // A non-finite norm (inf or NaN gradient) leaves the gradients as they are.
  if (std::isfinite(total) && coef < 1.0) mul_scalar_(grads, coef);
  return Tensor::scalar(total, DType::F32, grads.device());
}

}  // namespace hg
