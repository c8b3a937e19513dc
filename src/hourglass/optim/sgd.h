// Stochastic gradient descent with optional momentum, dampening, Nesterov and L2 weight decay,
// with torch.optim.SGD's exact update rule. Weight decay applies to the arena's first
// decay_count elements only.
//
// With LarsOptions it is LARS, as timm's Lars: each parameter tensor that takes weight decay
// (when the decay is not 0) steps with (g + weight_decay * w) * trust (ops::lars_adapt_grads_,
// the tensors' norms from ops::segment_sum_squares over FlatParameters::offsets), the others
// with g; then the SGD update above without decay. The state is SGD's.
#pragma once

#include <optional>

#include "hourglass/ops/params.h"
#include "hourglass/optim/optimizer.h"

namespace hg::optim {

class Sgd final : public Optimizer {
 public:
  // Throws InvalidInput for a negative lr, momentum or weight decay, or for Nesterov without
  // momentum or with dampening.
  Sgd(FlatParameters flat, const SgdOptions& options,
      std::optional<LarsOptions> lars = std::nullopt);

  const char* name() const override { return lars_ ? "lars" : "sgd"; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;
  const SgdOptions& options() const { return options_; }

  // {"momentum", buffer} when momentum is on, else nothing.
  NamedTensors state() const override;

 private:
  void apply_update() override;

  SgdOptions options_;
  Tensor momentum_;  // f32 like params; undefined without momentum
  std::optional<LarsOptions> lars_;
  // LARS: the arena's offsets of the tensors that take weight decay (i64, on the parameters'
  // device); undefined when none does.
  Tensor lars_offsets_;
};

}  // namespace hg::optim
