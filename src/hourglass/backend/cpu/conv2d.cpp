#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

Tensor CpuBackend::conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  HG_ASSERT(false, "cpu conv2d: not implemented yet");
}

ops::Conv2dGrads CpuBackend::conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias, const Conv2dParams& p, InputGrad input_grad) {
  HG_ASSERT(false, "cpu conv2d_backward: not implemented yet");
}

}  // namespace hg
