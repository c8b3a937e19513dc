// Fused ops computed as the ops they fuse, on one backend: the CPU's implementation of them
// (what the GPU's fused kernels are tested against) and the GPU's for inputs its fused kernels
// do not cover. The results are the unfused ops' own.
#pragma once

#include "hourglass/ops/backend.h"

namespace hg {

// batch_norm_relu_max_pool_train: batch_norm_relu_train, then max_pool2d of its output.
ops::BatchNormReluPoolForward batch_norm_relu_then_max_pool(
    Backend& backend, const Tensor& x, const Tensor& weight, const Tensor& bias,
    Tensor& running_mean, Tensor& running_var, double momentum, double eps, const Pool2dParams& p);

// batch_norm_relu_max_pool_backward: add (of dy2, when defined), max_pool2d_backward (x stands
// for the pooled input: the same shape), then batch_norm_relu_backward from the mask.
ops::BatchNormGrads batch_norm_relu_max_pool_backward_composed(
    Backend& backend, const Tensor& dy, const Tensor& workspace, const Tensor& mask,
    const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd,
    const Pool2dParams& p, const Tensor& dy2);

}  // namespace hg
