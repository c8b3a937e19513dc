#include "hourglass/ops/op_cost.h"

#include "hourglass/ops/math_settings.h"

namespace hg::ops {

namespace {

double bytes_of(const Tensor& t) { return t.defined() ? double(t.nbytes()) : 0.0; }

}  // namespace

MathPrecision matmul_precision(DType dtype) {
  switch (dtype) {
    case DType::BF16: return MathPrecision::BF16;
    case DType::F16: return MathPrecision::F16;
    case DType::F32: return allow_tf32() ? MathPrecision::TF32 : MathPrecision::F32;
    case DType::F64: return MathPrecision::F64;
    default: return MathPrecision::None;
  }
}

OpCost conv2d_cost(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  const int64_t n = x.size(0), k = w.size(0), r = w.size(1), s = w.size(2), cg = w.size(3);
  const int64_t oh = conv_out_size(x.size(1), r, p.stride_h, p.pad_h, p.dilation_h);
  const int64_t ow = conv_out_size(x.size(2), s, p.stride_w, p.pad_w, p.dilation_w);
  const double outputs = double(n) * double(oh) * double(ow) * double(k);
  OpCost c;
  c.flops = 2 * outputs * double(cg) * double(r) * double(s);
  c.bytes = bytes_of(x) + bytes_of(w) + bytes_of(bias) + outputs * double(x.itemsize());
  c.precision = matmul_precision(x.dtype());
  return c;
}

OpCost conv2d_backward_cost(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            InputGrad input_grad) {
  const double per_pass = 2 * double(dy.numel()) * double(w.size(1) * w.size(2) * w.size(3));
  OpCost c;
  c.flops = per_pass;
  c.bytes = bytes_of(dy) + bytes_of(x) + bytes_of(w);  // the weight gradient's pass
  if (input_grad == InputGrad::Compute) {
    c.flops += per_pass;
    c.bytes += bytes_of(dy) + bytes_of(w) + bytes_of(x);
  }
  if (has_bias) {
    c.flops += double(dy.numel());
    c.bytes += bytes_of(dy) + double(w.size(0)) * double(x.itemsize());
  }
  c.precision = matmul_precision(x.dtype());
  return c;
}

OpCost linear_cost(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const double n = double(x.size(0)), in = double(x.size(1)), out = double(w.size(0));
  OpCost c;
  c.flops = 2 * n * in * out;
  c.bytes = bytes_of(x) + bytes_of(w) + bytes_of(bias) + n * out * double(x.itemsize());
  c.precision = matmul_precision(x.dtype());
  return c;
}

OpCost linear_backward_cost(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            InputGrad input_grad) {
  const double n = double(x.size(0)), in = double(x.size(1)), out = double(w.size(0));
  OpCost c;
  c.flops = 2 * n * in * out;
  c.bytes = bytes_of(dy) + bytes_of(x) + bytes_of(w);
  if (input_grad == InputGrad::Compute) {
    c.flops += 2 * n * in * out;
    c.bytes += bytes_of(dy) + bytes_of(w) + bytes_of(x);
  }
  if (has_bias) {
    c.flops += n * out;
    c.bytes += bytes_of(dy) + out * double(x.itemsize());
  }
  c.precision = matmul_precision(x.dtype());
  return c;
}

OpCost elementwise_cost(const Tensor& x, int reads, int writes) {
  OpCost c;
  c.bytes = bytes_of(x) * double(reads + writes);
  return c;
}

}  // namespace hg::ops
