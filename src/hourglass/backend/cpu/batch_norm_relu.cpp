// Batch norm fused with a residual add and a ReLU, on the CPU: the composition of this
// backend's own batch_norm_train, add, relu (forward) and relu_backward, batch_norm_backward
// (backward). The CPU gains nothing from fusing these passes that matters next to its
// convolutions, and composing the same kernels keeps the fused and unfused paths bit-identical
// (tests/train/test_fused_batch_norm.cpp trains a ResNet both ways and compares the bits).
#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

ops::BatchNormForward CpuBackend::batch_norm_relu_train(const Tensor& x, const Tensor& residual,
                                                        const Tensor& weight, const Tensor& bias,
                                                        Tensor& running_mean, Tensor& running_var,
                                                        double momentum, double eps) {
  ops::BatchNormForward out =
      batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps);
  out.y = relu(residual.defined() ? add(out.y, residual) : out.y);
  return out;
}

ops::BatchNormReluGrads CpuBackend::batch_norm_relu_backward(
    const Tensor& dy, const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& mean,
    const Tensor& invstd, ResidualGrad residual_grad, const Tensor& dy2) {
  const Tensor dz = relu_backward(dy2.defined() ? add(dy, dy2) : dy, y);
  const ops::BatchNormGrads g = batch_norm_backward(dz, x, weight, mean, invstd);
  ops::BatchNormReluGrads grads{g.dx, g.dweight, g.dbias, Tensor()};
  if (residual_grad == ResidualGrad::Compute) grads.dresidual = dz;
  return grads;
}

}  // namespace hg
