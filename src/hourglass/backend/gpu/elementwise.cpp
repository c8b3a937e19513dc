// Elementwise ops on the GPU (f32, bf16, f16; computed in float). ops.cpp has checked shapes,
// dtypes and devices and made the inputs contiguous; each op is one kernel launch on the
// device's stream (elementwise_kernels.cu).
#include "hourglass/backend/gpu/elementwise_kernels.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

namespace {

Tensor binary(const char* op, gpu::BinaryOp kind, const Tensor& a, const Tensor& b) {
  gpu::check_float(op, a);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  gpu::launch_binary(kind, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(), 0.0f,
                     a.dtype(), gpu::stream_for(a));
  return out;
}

// The scalar is rounded to f32 once, as the CPU rounds it to the f32 element type.
Tensor unary(const char* op, gpu::UnaryOp kind, const Tensor& a, double s) {
  gpu::check_float(op, a);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  gpu::launch_unary(kind, a.data_ptr(), out.data_ptr(), a.numel(), float(s), a.dtype(),
                    gpu::stream_for(a));
  return out;
}

}  // namespace

Tensor GpuBackend::add(const Tensor& a, const Tensor& b) {
  return binary("add", gpu::BinaryOp::Add, a, b);
}

Tensor GpuBackend::sub(const Tensor& a, const Tensor& b) {
  return binary("sub", gpu::BinaryOp::Sub, a, b);
}

Tensor GpuBackend::mul(const Tensor& a, const Tensor& b) {
  return binary("mul", gpu::BinaryOp::Mul, a, b);
}

Tensor GpuBackend::add_scalar(const Tensor& a, double s) {
  return unary("add_scalar", gpu::UnaryOp::AddScalar, a, s);
}

Tensor GpuBackend::mul_scalar(const Tensor& a, double s) {
  return unary("mul_scalar", gpu::UnaryOp::MulScalar, a, s);
}

void GpuBackend::add_(Tensor& dst, const Tensor& src, double alpha) {
  gpu::check_float("add_", dst);
  // alpha == 1 (gradient accumulation) skips the multiply, as the CPU does.
  const gpu::BinaryOp kind = alpha == 1.0 ? gpu::BinaryOp::Add : gpu::BinaryOp::AddScaled;
  gpu::launch_binary(kind, dst.data_ptr(), src.data_ptr(), dst.data_ptr(), dst.numel(),
                     float(alpha), dst.dtype(), gpu::stream_for(dst));
}

void GpuBackend::mul_scalar_(Tensor& dst, double s) {
  gpu::check_float("mul_scalar_", dst);
  gpu::launch_unary(gpu::UnaryOp::MulScalar, dst.data_ptr(), dst.data_ptr(), dst.numel(),
                    float(s), dst.dtype(), gpu::stream_for(dst));
}

Tensor GpuBackend::relu(const Tensor& x) {
  return unary("relu", gpu::UnaryOp::Relu, x, 0.0);
}

Tensor GpuBackend::relu_backward(const Tensor& dy, const Tensor& y) {
  return binary("relu_backward", gpu::BinaryOp::ReluBackward, dy, y);
}

}  // namespace hg
