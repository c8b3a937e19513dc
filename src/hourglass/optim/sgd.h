// Stochastic gradient descent with optional momentum, dampening, Nesterov and L2 weight decay,
// with torch.optim.SGD's exact update rule. Weight decay applies to the arena's first
// decay_count elements only.
#pragma once

#include "hourglass/ops/params.h"
#include "hourglass/optim/optimizer.h"

namespace hg::optim {

class Sgd final : public Optimizer {
 public:
  // Throws InvalidInput for a negative lr, momentum or weight decay, or for Nesterov without
  // momentum or with dampening.
  Sgd(FlatParameters flat, const SgdOptions& options);

  const char* name() const override { return "sgd"; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;
  const SgdOptions& options() const { return options_; }

  // {"momentum", buffer} when momentum is on, else nothing.
  NamedTensors state() const override;

 private:
  void apply_update() override;

  SgdOptions options_;
  Tensor momentum_;  // f32 like params; undefined without momentum
};

}  // namespace hg::optim
