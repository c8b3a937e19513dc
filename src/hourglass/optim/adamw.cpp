#include "hourglass/optim/adamw.h"

#include "hourglass/ops/ops.h"

namespace hg::optim {

AdamW::AdamW(FlatParameters flat, const AdamWOptions& options)
    : Optimizer(std::move(flat)), options_(options) {
  check_adam_options(options, "adamw");
  exp_avg_ = Tensor::zeros(flat_.params.shape(), DType::F32, flat_.params.device());
  exp_avg_sq_ = Tensor::zeros(flat_.params.shape(), DType::F32, flat_.params.device());
  applied_steps_ = Tensor::zeros({1}, DType::F32, flat_.params.device());
  store_lr(options.lr);
}

void AdamW::set_lr(double lr) {
  HG_CHECK(lr >= 0, "adamw: learning rate must be non-negative, got {}", lr);
  options_.lr = lr;
  store_lr(lr);
}

NamedTensors AdamW::state() const {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}, {"applied_steps", applied_steps_}};
}

Tensor AdamW::missing_state(const std::string& name, int64_t step_count) const {
  if (name != "applied_steps") return {};
  return Tensor::from_vector<float>({float(step_count)}, {1});
}

void AdamW::apply_update() {
  // Counted first, as torch.optim.AdamW increments its step before the update uses it; both
  // calls below read the same count.
  ops::advance_step_(applied_steps_, skip_);
  const int64_t n = flat_.params.numel();
  const int64_t decayed = options_.weight_decay != 0.0 ? flat_.decay_count : 0;
  if (decayed == 0 || decayed == n) {  // one call over the whole arena
    AdamWOptions o = options_;
    if (decayed == 0) o.weight_decay = 0.0;
    ops::adamw_step(flat_.params, flat_.grads, exp_avg_, exp_avg_sq_, o, applied_steps_, skip_,
                    lr_device_);
    return;
  }
  // Two calls: the decayed prefix with weight decay, the rest without.
  const DecaySplit p = split_at_decay(flat_.params, decayed);
  const DecaySplit g = split_at_decay(flat_.grads, decayed);
  const DecaySplit m = split_at_decay(exp_avg_, decayed);
  const DecaySplit v = split_at_decay(exp_avg_sq_, decayed);
  Tensor p_decay = p.decay, m_decay = m.decay, v_decay = v.decay;
  ops::adamw_step(p_decay, g.decay, m_decay, v_decay, options_, applied_steps_, skip_, lr_device_);
  AdamWOptions no_decay = options_;
  no_decay.weight_decay = 0.0;
  Tensor p_rest = p.no_decay, m_rest = m.no_decay, v_rest = v.no_decay;
  ops::adamw_step(p_rest, g.no_decay, m_rest, v_rest, no_decay, applied_steps_, skip_, lr_device_);
}

}  // namespace hg::optim
