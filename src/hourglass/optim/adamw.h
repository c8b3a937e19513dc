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

  // {"exp_avg", m}, {"exp_avg_sq", v}, {"applied_steps", f32 [1]: the number of updates
  // applied, which the bias corrections use; it stays behind step_count() by the skipped ones}.
  NamedTensors state() const override;
  // "applied_steps" of a checkpoint written before it existed: step_count, the count those
  // runs used for the bias corrections.
  Tensor missing_state(const std::string& name, int64_t step_count) const override;

 private:
  void apply_update() override;

  AdamWOptions options_;
  Tensor exp_avg_, exp_avg_sq_;  // f32 like params
  // On the parameters' device, advanced there unless the skip flag is set: a skipped fp16 step
  // leaves the bias corrections where they were, and nothing is read back to the host.
  Tensor applied_steps_;
};

}  // namespace hg::optim
