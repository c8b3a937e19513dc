#include "hourglass/optim/sgd.h"

#include "hourglass/ops/ops.h"

namespace hg::optim {

Sgd::Sgd(FlatParameters flat, const SgdOptions& options, std::optional<LarsOptions> lars)
    : Optimizer(std::move(flat)), options_(options), lars_(lars) {
  HG_CHECK(options.lr >= 0, "sgd: learning rate must be non-negative, got {}", options.lr);
  HG_CHECK(options.momentum >= 0, "sgd: momentum must be non-negative, got {}", options.momentum);
  HG_CHECK(options.weight_decay >= 0, "sgd: weight decay must be non-negative, got {}",
           options.weight_decay);
  HG_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
           "sgd: nesterov needs momentum > 0 and dampening 0 (got momentum {}, dampening {})",
           options.momentum, options.dampening);
  if (options.momentum != 0.0)
    momentum_ = Tensor::zeros(flat_.params.shape(), DType::F32, flat_.params.device());
  store_lr(options.lr);
  if (lars_) {
    HG_CHECK(lars_->trust_coeff > 0 && lars_->eps >= 0,
             "lars: trust coefficient must be positive and eps non-negative, got {} and {}",
             lars_->trust_coeff, lars_->eps);
    lars_offsets_ = decayed_offsets(flat_, options.weight_decay, "lars");
  }
}

void Sgd::set_lr(double lr) {
  HG_CHECK(lr >= 0, "sgd: learning rate must be non-negative, got {}", lr);
  options_.lr = lr;
  store_lr(lr);
}

NamedTensors Sgd::state() const {
  if (!momentum_.defined()) return {};
  return {{"momentum", momentum_}};
}

void Sgd::apply_update() {
  // The momentum buffer starts as the first gradient (PyTorch); after a checkpoint load the
  // restored step count says it is already initialised.
  const bool first = step_count_ == 1;
  if (lars_) {
    if (lars_offsets_.defined()) {  // the decayed tensors' gradients adapted, decay folded in
      const int64_t decayed = flat_.decay_count;
      Tensor g = flat_.grads.narrow(0, 0, decayed);
      const Tensor p = flat_.params.narrow(0, 0, decayed);
      ops::lars_adapt_grads_(g, p, lars_offsets_, ops::segment_sum_squares(p, lars_offsets_),
                             ops::segment_sum_squares(g, lars_offsets_), options_.weight_decay,
                             *lars_, lr_device_);
    }
    SgdOptions o = options_;
    o.weight_decay = 0.0;
    ops::sgd_step(flat_.params, flat_.grads, momentum_, o, first, skip_, lr_device_);
    return;
  }
  const int64_t n = flat_.params.numel();
  const int64_t decayed = options_.weight_decay != 0.0 ? flat_.decay_count : 0;
  if (decayed == 0 || decayed == n) {  // one call over the whole arena
    SgdOptions o = options_;
    if (decayed == 0) o.weight_decay = 0.0;
    ops::sgd_step(flat_.params, flat_.grads, momentum_, o, first, skip_, lr_device_);
    return;
  }
  // Two calls: the decayed prefix with weight decay, the rest without.
  const DecaySplit p = split_at_decay(flat_.params, decayed);
  const DecaySplit g = split_at_decay(flat_.grads, decayed);
  DecaySplit m = split_at_decay(momentum_, decayed);
  Tensor p_decay = p.decay, p_rest = p.no_decay;
  ops::sgd_step(p_decay, g.decay, m.decay, options_, first, skip_, lr_device_);
  SgdOptions no_decay = options_;
  no_decay.weight_decay = 0.0;
  ops::sgd_step(p_rest, g.no_decay, m.no_decay, no_decay, first, skip_, lr_device_);
}

}  // namespace hg::optim
