#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

ops::BatchNormForward CpuBackend::batch_norm_train(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean, Tensor& running_var, double momentum, double eps) {
  HG_ASSERT(false, "cpu batch_norm_train: not implemented yet");
}

Tensor CpuBackend::batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, double eps) {
  HG_ASSERT(false, "cpu batch_norm_eval: not implemented yet");
}

ops::BatchNormGrads CpuBackend::batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd) {
  HG_ASSERT(false, "cpu batch_norm_backward: not implemented yet");
}

}  // namespace hg
