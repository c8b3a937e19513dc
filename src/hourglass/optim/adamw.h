// AdamW (decoupled weight decay, Loshchilov & Hutter) with torch.optim.AdamW's exact update rule
// (amsgrad off). Weight decay applies to the arena's first decay_count elements only.
#pragma once

#include "hourglass/ops/params.h"
#include "hourglass/optim/optimizer.h"

namespace hg::optim {

class AdamW final : public Optimizer {
 public:
  // Throws InvalidInput for a negative lr, eps or weight decay, or betas outside [0, 1).
  AdamW(FlatParameters flat, const AdamWOptions& options);

  const char* name() const override { return "adamw"; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;
  const AdamWOptions& options() const { return options_; }

  // {"exp_avg", m}, {"exp_avg_sq", v}.
  NamedTensors state() const override;

 private:
  void apply_update() override;

  AdamWOptions options_;
  Tensor exp_avg_, exp_avg_sq_;   // f32 like params
};

}  // namespace hg::optim
