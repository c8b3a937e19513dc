// LAMB (You et al. 2019, "Large batch optimization for deep learning"), as timm's Lamb without
// its own gradient clipping (train.clip_grad_norm clips): Adam's moments and bias-corrected
// direction d = m^ / (sqrt(v^) + eps) (ops::lamb_direction), plus weight_decay * w on the
// tensors that take weight decay, whose d is then scaled by the trust ratio |w| / |d| (1 where
// a norm is 0; with trust_clip at most 1: LAMBC) per tensor (ops::lars_adapt_grads_ over
// FlatParameters::offsets); then w -= lr d. As in timm, only tensors with a weight decay above 0
// are adapted. The direction is written over the gradients, which the step zeroes next.
#pragma once

#include "hourglass/ops/params.h"
#include "hourglass/optim/optimizer.h"

namespace hg::optim {

class Lamb final : public Optimizer {
 public:
  // Throws InvalidInput for a negative lr, eps or weight decay, betas outside [0, 1), or an
  // arena whose offsets miss its decay boundary.
  Lamb(FlatParameters flat, const AdamWOptions& options, bool trust_clip);

  const char* name() const override { return "lamb"; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;

  // {"exp_avg", m}, {"exp_avg_sq", v}, {"applied_steps", f32 [1]}: AdamW's.
  NamedTensors state() const override;

 private:
  void apply_update() override;

  AdamWOptions options_;
  bool trust_clip_;
  Tensor exp_avg_, exp_avg_sq_, applied_steps_;
  Tensor offsets_;  // the decayed tensors' offsets (i64, device); undefined when none decays
  Tensor one_;      // f64 [1] holding 1: the trust clip's divisor (LAMBC clips at 1)
};

}  // namespace hg::optim
