// Every op, declared once. Each function checks shapes, dtypes and devices (errors name the op
// and the operands) and dispatches to the backend of its inputs' device. These are raw ops with
// no autograd; autograd/functions.h wraps them into a differentiable API.
//
// Layouts: activations NHWC [N, H, W, C]; convolution weights KRSC [K, R, S, C/groups];
// linear weights [out, in]. Compute ops take f32 on the CPU (f32, bf16, f16 on GPUs).
#pragma once

#include "hourglass/ops/params.h"
#include "hourglass/tensor/tensor.h"

namespace hg::ops {

// ---- math mode ----
// Whether f32 convolutions and matrix products may run on TF32 tensor cores (10-bit mantissa
// inputs, f32 accumulation): precision = "tf32". Process-wide; off by default; the CPU backend
// ignores it.
void set_allow_tf32(bool allow);
bool allow_tf32();
// Whether ops must give bit-identical results for identical inputs (the run's `deterministic`
// key): the GPU's library convolutions then use only deterministic algorithms (hourglass's own
// kernels always are). Process-wide; off by default.
void set_deterministic(bool on);
bool deterministic();

// ---- convolution ----
// x [N,H,W,C], w [K,R,S,C/groups], bias [K] or undefined -> [N,P,Q,K]
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
struct Conv2dGrads {
  Tensor dx, dw, dbias;   // dx undefined when InputGrad::Skip, dbias when there is no bias
};
Conv2dGrads conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            const Conv2dParams& p, InputGrad input_grad);

// ---- batch normalisation over N,H,W per channel C (x is [N,H,W,C] or [N,C]) ----
struct BatchNormForward {
  Tensor y;
  Tensor mean, invstd;   // [C] f32 batch statistics saved for backward
};
// Normalises with batch statistics and updates running_mean / running_var in place
// (running_var takes the unbiased variance, as PyTorch does).
BatchNormForward batch_norm_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  Tensor& running_mean, Tensor& running_var, double momentum,
                                  double eps);
Tensor batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, double eps);
struct BatchNormGrads {
  Tensor dx, dweight, dbias;
};
BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& invstd);

// ---- pooling ----
struct MaxPoolForward {
  Tensor y;
  Tensor workspace;   // backend-specific record of the arg-max, for backward
};
MaxPoolForward max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor max_pool2d_backward(const Tensor& dy, const Tensor& x, const Tensor& workspace,
                           const Pool2dParams& p);
// Padding counts towards the divisor (PyTorch's default, count_include_pad=True).
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2dParams& p);
// [N,H,W,C] -> [N,C]
Tensor global_avg_pool(const Tensor& x);
Tensor global_avg_pool_backward(const Tensor& dy, const Tensor& x);

// ---- linear: y = x w^T + bias, x [N,in], w [out,in] ----
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias);
struct LinearGrads {
  Tensor dx, dw, dbias;
};
LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            InputGrad input_grad);

// ---- elementwise (same shapes; f32 or f64) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor add_scalar(const Tensor& a, double s);
Tensor mul_scalar(const Tensor& a, double s);
// dst += alpha * src, in place (gradient accumulation).
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);
void mul_scalar_(Tensor& dst, double s);
Tensor relu(const Tensor& x);
// dy where y > 0, else 0.
Tensor relu_backward(const Tensor& dy, const Tensor& y);

// ---- reductions (to a scalar f32 tensor on the input's device) ----
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);
Tensor sum_squares(const Tensor& x);

// ---- global-norm gradient clipping, decided on the device ----
// torch.nn.utils.clip_grad_norm_ (L2) over a flat f32 gradient tensor, given its sum of squares
// (a one-element f32 tensor on the same device, e.g. from sum_squares): with
// norm = sqrt(sum_squares) and coef = max_norm / (norm + 1e-6), computed in double,
// grads *= float(coef) when coef < 1. A non-finite norm leaves the gradients untouched (the
// loss scaler's skip handles that step). Returns the norm as a scalar f32 tensor on the device;
// nothing is read back to the host.
Tensor clip_grads_(Tensor& grads, const Tensor& sum_squares, double max_norm);

// ---- softmax cross-entropy: logits [N,C] f32, labels [N] i64 ----
struct CrossEntropyForward {
  Tensor loss;    // scalar f32: mean over the batch
  Tensor probs;   // [N,C] softmax, saved for backward
};
// With label smoothing s the target is (1-s) one-hot + s/C uniform.
CrossEntropyForward cross_entropy(const Tensor& logits, const Tensor& labels,
                                  double label_smoothing);
// dloss is the scalar gradient of the loss.
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels,
                              double label_smoothing);
// Number of rows whose arg-max equals the label, as a scalar f32 (stays on the device).
Tensor count_correct(const Tensor& logits, const Tensor& labels);

// ---- dropout: element i is kept with probability 1-p, decided by Philox(seed, offset + i) ----
struct DropoutForward {
  Tensor y;
  Tensor mask;   // u8, 1 where kept
};
DropoutForward dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);
Tensor dropout_backward(const Tensor& dy, const Tensor& mask, double p);

// ---- optimizer updates over flat f32 tensors of equal shape ----
// `skip`, when defined, is a one-element f32 tensor on the parameters' device; the update does
// nothing when it is nonzero (the loss scaler's found-inf flag). The decision is taken on the
// device: the host never waits for it.
void sgd_step(Tensor& params, const Tensor& grads, Tensor& momentum, const SgdOptions& o,
              bool first_step, const Tensor& skip = Tensor());
// `step` is a one-element f32 tensor on the parameters' device holding the number of this
// update (1 for the first; the bias corrections use it), read on the device. It must be >= 1
// when the update is applied: the CPU throws otherwise, a GPU gives non-finite parameters.
void adamw_step(Tensor& params, const Tensor& grads, Tensor& exp_avg, Tensor& exp_avg_sq,
                const AdamWOptions& o, const Tensor& step, const Tensor& skip = Tensor());
// step += 1 on the device, unless `skip` is defined and nonzero: the count of applied updates
// an optimizer keeps next to its state (call it before the update it counts). `step` is a
// one-element f32 tensor (integers are exact in f32 up to 2^24 steps; past that the count
// stops growing, where Adam's bias corrections are 1 in f32 anyway).
void advance_step_(Tensor& step, const Tensor& skip = Tensor());

// ---- dynamic loss scaling, on the device ----
// The scaler's state is an f32 tensor [3] on the gradients' device:
// {scale, found_inf (0 or 1), good_steps (steps since the scale last changed)}.
inline constexpr int64_t kLossScaleState = 3;
// grads *= 1/scale in place, over a flat f32 tensor; sets found_inf to 1 when any gradient is
// inf or NaN (never clears it, so several calls accumulate).
void unscale_grads_(Tensor& grads, Tensor& state);
// After an optimizer step: with found_inf, scale *= backoff and good_steps = 0; otherwise
// good_steps += 1 and, when it reaches growth_interval, scale *= growth and good_steps = 0.
// Clears found_inf.
void update_loss_scale_(Tensor& state, double growth, double backoff, int64_t growth_interval);

}  // namespace hg::ops
