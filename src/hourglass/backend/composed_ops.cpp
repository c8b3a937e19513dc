#include "hourglass/backend/composed_ops.h"

namespace hg {

ops::BatchNormReluPoolForward batch_norm_relu_then_max_pool(
    Backend& backend, const Tensor& x, const Tensor& weight, const Tensor& bias,
    Tensor& running_mean, Tensor& running_var, double momentum, double eps, const Pool2dParams& p) {
  ops::BatchNormForward f = backend.batch_norm_relu_train(x, Tensor(), weight, bias, running_mean,
                                                          running_var, momentum, eps);
  ops::MaxPoolForward pooled = backend.max_pool2d(f.y, p);
  return ops::BatchNormReluPoolForward{std::move(pooled.y), std::move(pooled.workspace),
                                       std::move(f.mask), std::move(f.mean), std::move(f.invstd)};
}

ops::BatchNormGrads batch_norm_relu_max_pool_backward_composed(
    Backend& backend, const Tensor& dy, const Tensor& workspace, const Tensor& mask,
    const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd,
    const Pool2dParams& p, const Tensor& dy2) {
  const Tensor dz =
      backend.max_pool2d_backward(dy2.defined() ? backend.add(dy, dy2) : dy, x, workspace, p);
  ops::BatchNormReluGrads g = backend.batch_norm_relu_backward(dz, mask, x, weight, mean, invstd,
                                                               ResidualGrad::Skip, Tensor());
  return ops::BatchNormGrads{std::move(g.dx), std::move(g.dweight), std::move(g.dbias)};
}

}  // namespace hg
