// Validation and dispatch for every op in ops.h.
#include "hourglass/ops/ops.h"

#include <atomic>
#include <cmath>

#include "hourglass/ops/backend.h"

namespace hg::ops {

namespace {

void check_float(const char* op, const char* what, const Tensor& t) {
  HG_CHECK(t.defined(), "{}: {} is undefined", op, what);
  HG_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64 || t.dtype() == DType::BF16 ||
               t.dtype() == DType::F16,
           "{}: {} must be a floating tensor, got {}", op, what, t.describe());
}

void check_vector(const char* op, const char* what, const Tensor& t, int64_t n) {
  HG_CHECK(t.dim() == 1 && t.size(0) == n, "{}: {} must have shape [{}], got {}", op, what, n,
           t.describe());
}

// Channel count of a batch-norm input: NHWC or [N,C].
int64_t bn_channels(const char* op, const Tensor& x) {
  HG_CHECK(x.dim() == 4 || x.dim() == 2, "{}: input must be [N,H,W,C] or [N,C], got {}", op,
           x.describe());
  return x.size(-1);
}

void check_pool(const char* op, const Tensor& x, const Pool2dParams& p) {
  check_dim(op, "input", x, 4);
  HG_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 &&
               p.pad_h >= 0 && p.pad_w >= 0,
           "{}: kernel and stride must be positive and padding non-negative", op);
  HG_CHECK(p.pad_h * 2 <= p.kernel_h && p.pad_w * 2 <= p.kernel_w,
           "{}: padding ({},{}) must be at most half the kernel ({},{})", op, p.pad_h, p.pad_w,
           p.kernel_h, p.kernel_w);
  const int64_t oh = conv_out_size(x.size(1), p.kernel_h, p.stride_h, p.pad_h);
  const int64_t ow = conv_out_size(x.size(2), p.kernel_w, p.stride_w, p.pad_w);
  HG_CHECK(oh > 0 && ow > 0, "{}: kernel {}x{} does not fit input {}", op, p.kernel_h,
           p.kernel_w, x.describe());
}

Tensor contig(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_deterministic{false};

}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void set_deterministic(bool on) { g_deterministic.store(on, std::memory_order_relaxed); }
bool deterministic() { return g_deterministic.load(std::memory_order_relaxed); }

Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& bias, const Conv2dParams& p) {
  const char* op = "conv2d";
  check_float(op, "input", x0);
  check_float(op, "weight", w0);
  check_dim(op, "input [N,H,W,C]", x0, 4);
  check_dim(op, "weight [K,R,S,C/groups]", w0, 4);
  check_same_device(op, x0, w0);
  check_same_dtype(op, x0, w0);
  HG_CHECK(p.groups >= 1 && x0.size(3) % p.groups == 0 && w0.size(0) % p.groups == 0,
           "{}: groups={} must divide input channels {} and output channels {}", op, p.groups,
           x0.size(3), w0.size(0));
  HG_CHECK(w0.size(3) * p.groups == x0.size(3),
           "{}: weight {} expects {} input channels, input {} has {}", op, w0.describe(),
           w0.size(3) * p.groups, x0.describe(), x0.size(3));
  HG_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0 &&
               p.pad_h >= 0 && p.pad_w >= 0,
           "{}: stride and dilation must be positive, padding non-negative", op);
  const int64_t oh = conv_out_size(x0.size(1), w0.size(1), p.stride_h, p.pad_h, p.dilation_h);
  const int64_t ow = conv_out_size(x0.size(2), w0.size(2), p.stride_w, p.pad_w, p.dilation_w);
  HG_CHECK(oh > 0 && ow > 0, "{}: kernel {} does not fit input {}", op, w0.describe(),
           x0.describe());
  if (bias.defined()) {
    check_vector(op, "bias", bias, w0.size(0));
    check_same_device(op, x0, bias);
  }
  return backend_for(x0.device()).conv2d(x0.contiguous(), w0.contiguous(), contig(bias), p);
}

Conv2dGrads conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            const Conv2dParams& p, InputGrad input_grad) {
  const char* op = "conv2d_backward";
  check_dim(op, "grad output", dy, 4);
  HG_CHECK(dy.size(0) == x.size(0) && dy.size(3) == w.size(0) &&
               dy.size(1) == conv_out_size(x.size(1), w.size(1), p.stride_h, p.pad_h,
                                           p.dilation_h) &&
               dy.size(2) == conv_out_size(x.size(2), w.size(2), p.stride_w, p.pad_w,
                                           p.dilation_w),
           "{}: grad output {} does not match input {} and weight {}", op, dy.describe(),
           x.describe(), w.describe());
  check_same_dtype(op, dy, x);
  return backend_for(x.device())
      .conv2d_backward(dy.contiguous(), x.contiguous(), w.contiguous(), has_bias, p, input_grad);
}

BatchNormForward batch_norm_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  Tensor& running_mean, Tensor& running_var, double momentum,
                                  double eps) {
  const char* op = "batch_norm";
  check_float(op, "input", x);
  const int64_t c = bn_channels(op, x);
  check_vector(op, "weight", weight, c);
  check_vector(op, "bias", bias, c);
  check_vector(op, "running_mean", running_mean, c);
  check_vector(op, "running_var", running_var, c);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&weight, &bias, &running_mean, &running_var}) {
    check_dtype(op, "parameters and statistics", *t, DType::F32);
    check_same_device(op, x, *t);
  }
  HG_CHECK(x.numel() / c > 1, "{}: training needs more than one value per channel, got {}", op,
           x.describe());
  return backend_for(x.device())
      .batch_norm_train(x.contiguous(), weight, bias, running_mean, running_var, momentum, eps);
}

Tensor batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, double eps) {
  const char* op = "batch_norm";
  check_float(op, "input", x);
  const int64_t c = bn_channels(op, x);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&weight, &bias, &running_mean, &running_var}) {
    check_vector(op, "parameter", *t, c);
    check_dtype(op, "parameters and statistics", *t, DType::F32);
    check_same_device(op, x, *t);
  }
  return backend_for(x.device())
      .batch_norm_eval(x.contiguous(), weight, bias, running_mean, running_var, eps);
}

BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& invstd) {
  check_same_shape("batch_norm_backward", dy, x);
  return backend_for(x.device())
      .batch_norm_backward(dy.contiguous(), x.contiguous(), weight, mean, invstd);
}

MaxPoolForward max_pool2d(const Tensor& x, const Pool2dParams& p) {
  check_float("max_pool2d", "input", x);
  check_pool("max_pool2d", x, p);
  return backend_for(x.device()).max_pool2d(x.contiguous(), p);
}

Tensor max_pool2d_backward(const Tensor& dy, const Tensor& x, const Tensor& workspace,
                           const Pool2dParams& p) {
  check_pool("max_pool2d_backward", x, p);
  return backend_for(x.device()).max_pool2d_backward(dy.contiguous(), x, workspace, p);
}

Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) {
  check_float("avg_pool2d", "input", x);
  check_pool("avg_pool2d", x, p);
  return backend_for(x.device()).avg_pool2d(x.contiguous(), p);
}

Tensor avg_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2dParams& p) {
  check_pool("avg_pool2d_backward", x, p);
  return backend_for(x.device()).avg_pool2d_backward(dy.contiguous(), x, p);
}

Tensor global_avg_pool(const Tensor& x) {
  check_float("global_avg_pool", "input", x);
  check_dim("global_avg_pool", "input [N,H,W,C]", x, 4);
  return backend_for(x.device()).global_avg_pool(x.contiguous());
}

Tensor global_avg_pool_backward(const Tensor& dy, const Tensor& x) {
  HG_CHECK(dy.dim() == 2 && dy.size(0) == x.size(0) && dy.size(1) == x.size(3),
           "global_avg_pool_backward: grad {} does not match input {}", dy.describe(),
           x.describe());
  return backend_for(x.device()).global_avg_pool_backward(dy.contiguous(), x);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const char* op = "linear";
  check_float(op, "input", x);
  check_float(op, "weight", w);
  check_dim(op, "input [N,in]", x, 2);
  check_dim(op, "weight [out,in]", w, 2);
  check_same_device(op, x, w);
  check_same_dtype(op, x, w);
  HG_CHECK(x.size(1) == w.size(1), "{}: input {} has {} features, weight {} expects {}", op,
           x.describe(), x.size(1), w.describe(), w.size(1));
  if (bias.defined()) {
    check_vector(op, "bias", bias, w.size(0));
    check_same_device(op, x, bias);
  }
  return backend_for(x.device()).linear(x.contiguous(), w.contiguous(), contig(bias));
}

LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            InputGrad input_grad) {
  HG_CHECK(dy.dim() == 2 && dy.size(0) == x.size(0) && dy.size(1) == w.size(0),
           "linear_backward: grad {} does not match input {} and weight {}", dy.describe(),
           x.describe(), w.describe());
  return backend_for(x.device())
      .linear_backward(dy.contiguous(), x.contiguous(), w.contiguous(), has_bias, input_grad);
}

namespace {
void check_binary(const char* op, const Tensor& a, const Tensor& b) {
  check_float(op, "lhs", a);
  check_float(op, "rhs", b);
  check_same_shape(op, a, b);
  check_same_dtype(op, a, b);
  check_same_device(op, a, b);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  check_binary("add", a, b);
  return backend_for(a.device()).add(a.contiguous(), b.contiguous());
}
Tensor sub(const Tensor& a, const Tensor& b) {
  check_binary("sub", a, b);
  return backend_for(a.device()).sub(a.contiguous(), b.contiguous());
}
Tensor mul(const Tensor& a, const Tensor& b) {
  check_binary("mul", a, b);
  return backend_for(a.device()).mul(a.contiguous(), b.contiguous());
}
Tensor add_scalar(const Tensor& a, double s) {
  check_float("add_scalar", "input", a);
  return backend_for(a.device()).add_scalar(a.contiguous(), s);
}
Tensor mul_scalar(const Tensor& a, double s) {
  check_float("mul_scalar", "input", a);
  return backend_for(a.device()).mul_scalar(a.contiguous(), s);
}
void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_binary("add_", dst, src);
  HG_CHECK(dst.is_contiguous(), "add_: destination {} must be contiguous", dst.describe());
  backend_for(dst.device()).add_(dst, src.contiguous(), alpha);
}
void mul_scalar_(Tensor& dst, double s) {
  check_float("mul_scalar_", "destination", dst);
  HG_CHECK(dst.is_contiguous(), "mul_scalar_: destination {} must be contiguous", dst.describe());
  backend_for(dst.device()).mul_scalar_(dst, s);
}
Tensor relu(const Tensor& x) {
  check_float("relu", "input", x);
  return backend_for(x.device()).relu(x.contiguous());
}
Tensor relu_backward(const Tensor& dy, const Tensor& y) {
  check_binary("relu_backward", dy, y);
  return backend_for(y.device()).relu_backward(dy.contiguous(), y.contiguous());
}

Tensor sum(const Tensor& x) {
  check_float("sum", "input", x);
  return backend_for(x.device()).sum(x.contiguous());
}
Tensor mean(const Tensor& x) {
  check_float("mean", "input", x);
  HG_CHECK(x.numel() > 0, "mean of empty tensor {}", x.describe());
  Tensor s = backend_for(x.device()).sum(x.contiguous());
  return backend_for(x.device()).mul_scalar(s, 1.0 / double(x.numel()));
}
Tensor sum_squares(const Tensor& x) {
  check_float("sum_squares", "input", x);
  return backend_for(x.device()).sum_squares(x.contiguous());
}

Tensor clip_grads_(Tensor& grads, const Tensor& sum_squares, double max_norm) {
  const char* op = "clip_grads_";
  HG_CHECK(grads.defined(), "{}: gradients are undefined", op);
  check_dtype(op, "gradients", grads, DType::F32);
  HG_CHECK(grads.is_contiguous(), "{}: gradients {} must be contiguous", op, grads.describe());
  HG_CHECK(sum_squares.defined() && sum_squares.numel() == 1,
           "{}: sum_squares must have one element (ops::sum_squares(grads)), got {}", op,
           sum_squares.describe());
  check_dtype(op, "sum_squares", sum_squares, DType::F32);
  check_same_device(op, grads, sum_squares);
  HG_CHECK(std::isfinite(max_norm) && max_norm > 0,
           "{}: max_norm must be positive and finite, got {}", op, max_norm);
  return backend_for(grads.device()).clip_grads_(grads, sum_squares, max_norm);
}

namespace {
void check_logits_labels(const char* op, const Tensor& logits, const Tensor& labels) {
  check_float(op, "logits", logits);
  check_dim(op, "logits [N,C]", logits, 2);
  check_dtype(op, "labels", labels, DType::I64);
  HG_CHECK(labels.dim() == 1 && labels.size(0) == logits.size(0),
           "{}: labels {} do not match logits {}", op, labels.describe(), logits.describe());
  check_same_device(op, logits, labels);
}
}  // namespace

CrossEntropyForward cross_entropy(const Tensor& logits, const Tensor& labels,
                                  double label_smoothing) {
  check_logits_labels("cross_entropy", logits, labels);
  HG_CHECK(label_smoothing >= 0.0 && label_smoothing < 1.0,
           "cross_entropy: label_smoothing must be in [0, 1), got {}", label_smoothing);
  HG_CHECK(logits.size(0) > 0, "cross_entropy: empty batch");
  return backend_for(logits.device())
      .cross_entropy(logits.contiguous(), labels.contiguous(), label_smoothing);
}

Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels,
                              double label_smoothing) {
  HG_CHECK(dloss.numel() == 1, "cross_entropy_backward: grad of the loss must be a scalar, got {}",
           dloss.describe());
  return backend_for(probs.device())
      .cross_entropy_backward(dloss, probs, labels.contiguous(), label_smoothing);
}

Tensor count_correct(const Tensor& logits, const Tensor& labels) {
  check_logits_labels("count_correct", logits, labels);
  return backend_for(logits.device()).count_correct(logits.contiguous(), labels.contiguous());
}

DropoutForward dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  check_float("dropout", "input", x);
  HG_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got {}", p);
  return backend_for(x.device()).dropout(x.contiguous(), p, seed, offset);
}

Tensor dropout_backward(const Tensor& dy, const Tensor& mask, double p) {
  HG_CHECK(dy.shape() == mask.shape(), "dropout_backward: grad {} does not match mask {}",
           dy.describe(), mask.describe());
  return backend_for(dy.device()).dropout_backward(dy.contiguous(), mask, p);
}

namespace {
void check_flat(const char* op, const Tensor& ref, std::initializer_list<const Tensor*> others) {
  check_dtype(op, "parameters", ref, DType::F32);
  HG_CHECK(ref.is_contiguous(), "{}: parameters must be contiguous", op);
  for (const Tensor* t : others) {
    check_dtype(op, "optimizer operand", *t, DType::F32);
    check_same_shape(op, ref, *t);
    check_same_device(op, ref, *t);
    HG_CHECK(t->is_contiguous(), "{}: operand {} must be contiguous", op, t->describe());
  }
}

void check_skip(const char* op, const Tensor& params, const Tensor& skip) {
  if (!skip.defined()) return;
  HG_CHECK(skip.numel() == 1, "{}: skip flag must have one element, got {}", op, skip.describe());
  check_dtype(op, "skip flag", skip, DType::F32);
  check_same_device(op, params, skip);
}

void check_step(const char* op, const Tensor& params, const Tensor& step) {
  HG_CHECK(step.defined() && step.numel() == 1,
           "{}: step must be a one-element f32 tensor (the optimizer's count of applied updates), "
           "got {}", op, step.describe());
  check_dtype(op, "step", step, DType::F32);
  check_same_device(op, params, step);
}
}  // namespace

void sgd_step(Tensor& params, const Tensor& grads, Tensor& momentum, const SgdOptions& o,
              bool first_step, const Tensor& skip) {
  check_skip("sgd_step", params, skip);
  if (o.momentum != 0.0)
    check_flat("sgd_step", params, {&grads, &momentum});
  else
    check_flat("sgd_step", params, {&grads});
  HG_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
           "sgd: nesterov needs momentum > 0 and dampening 0");
  backend_for(params.device()).sgd_step(params, grads, momentum, o, first_step, skip);
}

void adamw_step(Tensor& params, const Tensor& grads, Tensor& exp_avg, Tensor& exp_avg_sq,
                const AdamWOptions& o, const Tensor& step, const Tensor& skip) {
  check_flat("adamw_step", params, {&grads, &exp_avg, &exp_avg_sq});
  check_skip("adamw_step", params, skip);
  check_step("adamw_step", params, step);
  backend_for(params.device()).adamw_step(params, grads, exp_avg, exp_avg_sq, o, step, skip);
}

void advance_step_(Tensor& step, const Tensor& skip) {
  check_step("advance_step_", step, step);
  HG_CHECK(step.is_contiguous(), "advance_step_: step {} must be contiguous", step.describe());
  check_skip("advance_step_", step, skip);
  backend_for(step.device()).advance_step_(step, skip);
}

namespace {
void check_scaler_state(const char* op, const Tensor& state) {
  check_dtype(op, "loss-scale state", state, DType::F32);
  HG_CHECK(state.dim() == 1 && state.size(0) == kLossScaleState && state.is_contiguous(),
           "{}: loss-scale state must be a contiguous [{}] tensor, got {}", op, kLossScaleState,
           state.describe());
}
}  // namespace

void unscale_grads_(Tensor& grads, Tensor& state) {
  const char* op = "unscale_grads_";
  check_scaler_state(op, state);
  check_dtype(op, "gradients", grads, DType::F32);
  HG_CHECK(grads.is_contiguous(), "{}: gradients {} must be contiguous", op, grads.describe());
  check_same_device(op, grads, state);
  backend_for(grads.device()).unscale_grads_(grads, state);
}

void update_loss_scale_(Tensor& state, double growth, double backoff, int64_t growth_interval) {
  const char* op = "update_loss_scale_";
  check_scaler_state(op, state);
  HG_CHECK(growth >= 1.0 && backoff > 0.0 && backoff <= 1.0 && growth_interval >= 1,
           "{}: needs growth >= 1, 0 < backoff <= 1 and growth_interval >= 1, got {}, {}, {}",
           op, growth, backoff, growth_interval);
  backend_for(state.device()).update_loss_scale_(state, growth, backoff, growth_interval);
}

}  // namespace hg::ops
