#include "hourglass/optim/lamb.h"

#include "hourglass/ops/ops.h"

namespace hg::optim {

Lamb::Lamb(FlatParameters flat, const AdamWOptions& options, bool trust_clip)
    : Optimizer(std::move(flat)), options_(options), trust_clip_(trust_clip) {
  check_adam_options(options, "lamb");
  const Device device = flat_.params.device();
  exp_avg_ = Tensor::zeros(flat_.params.shape(), DType::F32, device);
  exp_avg_sq_ = Tensor::zeros(flat_.params.shape(), DType::F32, device);
  applied_steps_ = Tensor::zeros({1}, DType::F32, device);
  one_ = Tensor::from_vector<double>({1.0}, {1}).to(device);
  offsets_ = decayed_offsets(flat_, options.weight_decay, "lamb");
  store_lr(options.lr);
}

void Lamb::set_lr(double lr) {
  HG_CHECK(lr >= 0, "lamb: learning rate must be non-negative, got {}", lr);
  options_.lr = lr;
  store_lr(lr);
}

NamedTensors Lamb::state() const {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}, {"applied_steps", applied_steps_}};
}

void Lamb::apply_update() {
  ops::advance_step_(applied_steps_, skip_);
  const int64_t decayed = offsets_.defined() ? flat_.decay_count : 0;
  const DecaySplit p = split_at_decay(flat_.params, decayed);
  const DecaySplit g = split_at_decay(flat_.grads, decayed);
  const DecaySplit m = split_at_decay(exp_avg_, decayed);
  const DecaySplit v = split_at_decay(exp_avg_sq_, decayed);
  if (decayed > 0) {  // the direction with decay, scaled per tensor by its trust ratio
    Tensor d = g.decay, m_decay = m.decay, v_decay = v.decay;
    ops::lamb_direction(d, p.decay, g.decay, m_decay, v_decay, options_, applied_steps_, skip_);
    const LarsOptions trust{.trust_coeff = 1.0, .eps = 0.0, .trust_clip = trust_clip_};
    ops::lars_adapt_grads_(d, p.decay, offsets_, ops::segment_sum_squares(p.decay, offsets_),
                           ops::segment_sum_squares(d, offsets_), 0.0, trust, one_);
  }
  if (decayed < flat_.params.numel()) {
    AdamWOptions no_decay = options_;
    no_decay.weight_decay = 0.0;
    Tensor d = g.no_decay, m_rest = m.no_decay, v_rest = v.no_decay;
    ops::lamb_direction(d, p.no_decay, g.no_decay, m_rest, v_rest, no_decay, applied_steps_, skip_);
  }
  SgdOptions step;  // params -= lr * direction
  step.weight_decay = 0.0;
  Tensor no_momentum;
  ops::sgd_step(flat_.params, flat_.grads, no_momentum, step, false, skip_, lr_device_);
}

}  // namespace hg::optim
