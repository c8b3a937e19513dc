// The interface every backend implements: one virtual method per op, called by ops/ops.cpp
// after it has validated the arguments. Methods here may assume valid shapes, dtypes and a
// common device. backend/ provides the implementations and backend_for().
#pragma once

#include "hourglass/ops/ops.h"

namespace hg {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  virtual Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias,
                        const Conv2dParams& p) = 0;
  virtual ops::Conv2dGrads conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                           bool has_bias, const Conv2dParams& p,
                                           InputGrad input_grad) = 0;

  virtual ops::BatchNormForward batch_norm_train(const Tensor& x, const Tensor& weight,
                                                 const Tensor& bias, Tensor& running_mean,
                                                 Tensor& running_var, double momentum,
                                                 double eps) = 0;
  virtual Tensor batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 double eps) = 0;
  virtual ops::BatchNormGrads batch_norm_backward(const Tensor& dy, const Tensor& x,
                                                  const Tensor& weight, const Tensor& mean,
                                                  const Tensor& invstd) = 0;

  virtual ops::MaxPoolForward max_pool2d(const Tensor& x, const Pool2dParams& p) = 0;
  virtual Tensor max_pool2d_backward(const Tensor& dy, const Tensor& x, const Tensor& workspace,
                                     const Pool2dParams& p) = 0;
  virtual Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) = 0;
  virtual Tensor avg_pool2d_backward(const Tensor& dy, const Tensor& x,
                                     const Pool2dParams& p) = 0;
  virtual Tensor global_avg_pool(const Tensor& x) = 0;
  virtual Tensor global_avg_pool_backward(const Tensor& dy, const Tensor& x) = 0;

  virtual Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) = 0;
  virtual ops::LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                           bool has_bias, InputGrad input_grad) = 0;

  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor sub(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor mul(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor add_scalar(const Tensor& a, double s) = 0;
  virtual Tensor mul_scalar(const Tensor& a, double s) = 0;
  virtual void add_(Tensor& dst, const Tensor& src, double alpha) = 0;
  virtual void mul_scalar_(Tensor& dst, double s) = 0;
  virtual Tensor relu(const Tensor& x) = 0;
  virtual Tensor relu_backward(const Tensor& dy, const Tensor& y) = 0;

  virtual Tensor sum(const Tensor& x) = 0;
  virtual Tensor sum_squares(const Tensor& x) = 0;
  virtual Tensor clip_grads_(Tensor& grads, const Tensor& sum_squares, double max_norm) = 0;

  virtual ops::CrossEntropyForward cross_entropy(const Tensor& logits, const Tensor& labels,
                                                 double label_smoothing) = 0;
  virtual Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& probs,
                                        const Tensor& labels, double label_smoothing) = 0;
  virtual Tensor count_correct(const Tensor& logits, const Tensor& labels) = 0;

  virtual ops::DropoutForward dropout(const Tensor& x, double p, uint64_t seed,
                                      uint64_t offset) = 0;
  virtual Tensor dropout_backward(const Tensor& dy, const Tensor& mask, double p) = 0;

  virtual void sgd_step(Tensor& params, const Tensor& grads, Tensor& momentum,
                        const SgdOptions& o, bool first_step, const Tensor& skip) = 0;
  virtual void adamw_step(Tensor& params, const Tensor& grads, Tensor& exp_avg,
                          Tensor& exp_avg_sq, const AdamWOptions& o, const Tensor& step,
                          const Tensor& skip) = 0;
  virtual void advance_step_(Tensor& step, const Tensor& skip) = 0;
  virtual void unscale_grads_(Tensor& grads, Tensor& state) = 0;
  virtual void update_loss_scale_(Tensor& state, double growth, double backoff,
                                  int64_t growth_interval) = 0;
};

// The backend that runs ops on `device`; throws InvalidInput when none is built for it.
Backend& backend_for(Device device);

}  // namespace hg
