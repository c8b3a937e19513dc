#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

Tensor CpuBackend::add(const Tensor& a, const Tensor& b) {
  HG_ASSERT(false, "cpu add: not implemented yet");
}

Tensor CpuBackend::sub(const Tensor& a, const Tensor& b) {
  HG_ASSERT(false, "cpu sub: not implemented yet");
}

Tensor CpuBackend::mul(const Tensor& a, const Tensor& b) {
  HG_ASSERT(false, "cpu mul: not implemented yet");
}

Tensor CpuBackend::add_scalar(const Tensor& a, double s) {
  HG_ASSERT(false, "cpu add_scalar: not implemented yet");
}

Tensor CpuBackend::mul_scalar(const Tensor& a, double s) {
  HG_ASSERT(false, "cpu mul_scalar: not implemented yet");
}

void CpuBackend::add_(Tensor& dst, const Tensor& src, double alpha) {
  HG_ASSERT(false, "cpu add_: not implemented yet");
}

void CpuBackend::mul_scalar_(Tensor& dst, double s) {
  HG_ASSERT(false, "cpu mul_scalar_: not implemented yet");
}

Tensor CpuBackend::relu(const Tensor& x) {
  HG_ASSERT(false, "cpu relu: not implemented yet");
}

Tensor CpuBackend::relu_backward(const Tensor& dy, const Tensor& y) {
  HG_ASSERT(false, "cpu relu_backward: not implemented yet");
}

}  // namespace hg
