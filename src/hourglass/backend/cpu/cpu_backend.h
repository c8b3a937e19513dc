// The CPU backend: oneDNN for convolution, batch-norm, pooling and matrix products, plain
// loops on the OpenMP pool for the rest. Methods are defined one op per file in this folder.
#pragma once

#include "hourglass/ops/backend.h"

namespace hg {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) override;
  ops::Conv2dGrads conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias, const Conv2dParams& p, InputGrad input_grad) override;
  ops::BatchNormForward batch_norm_train(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean, Tensor& running_var, double momentum, double eps) override;
  Tensor batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, double eps) override;
  ops::BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd) override;
  ops::MaxPoolForward max_pool2d(const Tensor& x, const Pool2dParams& p) override;
  Tensor max_pool2d_backward(const Tensor& dy, const Tensor& x, const Tensor& workspace, const Pool2dParams& p) override;
  Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) override;
  Tensor avg_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2dParams& p) override;
  Tensor global_avg_pool(const Tensor& x) override;
  Tensor global_avg_pool_backward(const Tensor& dy, const Tensor& x) override;
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) override;
  ops::LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias, InputGrad input_grad) override;
  Tensor add(const Tensor& a, const Tensor& b) override;
  Tensor sub(const Tensor& a, const Tensor& b) override;
  Tensor mul(const Tensor& a, const Tensor& b) override;
  Tensor add_scalar(const Tensor& a, double s) override;
  Tensor mul_scalar(const Tensor& a, double s) override;
  void add_(Tensor& dst, const Tensor& src, double alpha) override;
  void mul_scalar_(Tensor& dst, double s) override;
  Tensor relu(const Tensor& x) override;
  Tensor relu_backward(const Tensor& dy, const Tensor& y) override;
  Tensor sum(const Tensor& x) override;
  Tensor sum_squares(const Tensor& x) override;
  Tensor clip_grads_(Tensor& grads, const Tensor& sum_squares, double max_norm) override;
  ops::CrossEntropyForward cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing) override;
  Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels, double label_smoothing) override;
  Tensor count_correct(const Tensor& logits, const Tensor& labels) override;
  ops::DropoutForward dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) override;
  Tensor dropout_backward(const Tensor& dy, const Tensor& mask, double p) override;
  void sgd_step(Tensor& params, const Tensor& grads, Tensor& momentum, const SgdOptions& o, bool first_step, const Tensor& skip) override;
  void adamw_step(Tensor& params, const Tensor& grads, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWOptions& o, const Tensor& step, const Tensor& skip) override;
  void advance_step_(Tensor& step, const Tensor& skip) override;
  void unscale_grads_(Tensor& grads, Tensor& state) override;
  void update_loss_scale_(Tensor& state, double growth, double backoff, int64_t growth_interval) override;
};

}  // namespace hg
