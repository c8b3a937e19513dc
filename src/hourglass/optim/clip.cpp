#include "hourglass/optim/clip.h"

#include <cmath>

#include "hourglass/ops/ops.h"

namespace hg::optim {

namespace {

// PyTorch adds this to the norm before dividing, so a zero gradient never divides by zero.
constexpr double kNormEps = 1e-6;

void check_max_norm(double max_norm) {
  HG_CHECK(std::isfinite(max_norm) && max_norm > 0,
           "clip_grad_norm: max_norm must be positive and finite, got {}", max_norm);
}

}  // namespace

double grad_norm(const FlatParameters& flat) {
  return std::sqrt(ops::sum_squares(flat.grads).item());
}

double clip_grad_norm(FlatParameters& flat, double max_norm) {
  check_max_norm(max_norm);
  const double total = grad_norm(flat);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + kNormEps);
  if (coef < 1.0) ops::mul_scalar_(flat.grads, coef);
  return total;
}

Tensor clip_grad_norm_tensor(FlatParameters& flat, double max_norm) {
  check_max_norm(max_norm);
  Tensor grads = flat.grads;
  return ops::clip_grads_(grads, ops::sum_squares(grads), max_norm);
}

}  // namespace hg::optim
