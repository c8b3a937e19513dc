#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

Tensor CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  HG_ASSERT(false, "cpu linear: not implemented yet");
}

ops::LinearGrads CpuBackend::linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias, InputGrad input_grad) {
  HG_ASSERT(false, "cpu linear_backward: not implemented yet");
}

}  // namespace hg
