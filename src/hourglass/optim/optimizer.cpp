#include "hourglass/optim/optimizer.h"

#include <fmt/format.h>

namespace hg::optim {

Optimizer::Optimizer(FlatParameters flat) : flat_(std::move(flat)) {
  HG_CHECK(flat_.params.defined() && flat_.grads.defined(),
           "optimizer: the flat parameters and gradients must be defined");
  check_dtype("optimizer", "flat parameters", flat_.params, DType::F32);
  check_dtype("optimizer", "flat gradients", flat_.grads, DType::F32);
  check_same_shape("optimizer", flat_.params, flat_.grads);
  check_same_device("optimizer", flat_.params, flat_.grads);
  HG_CHECK(flat_.params.dim() == 1 && flat_.params.is_contiguous() && flat_.grads.is_contiguous(),
           "optimizer: flat parameters must be contiguous 1-d tensors, got {}",
           flat_.params.describe());
  HG_CHECK(flat_.decay_count >= 0 && flat_.decay_count <= flat_.params.numel(),
           "optimizer: decay_count {} outside [0, {}]", flat_.decay_count, flat_.params.numel());
  lr_device_ = Tensor::zeros({1}, DType::F64, flat_.params.device());
}

void Optimizer::set_step_count(int64_t count) {
  HG_CHECK(count >= 0, "{}: negative step count {}", name(), count);
  step_count_ = count;
}

void Optimizer::store_lr(double lr) { lr_device_.fill_(lr); }

void Optimizer::step() {
  ++step_count_;
  apply_update();
}

void Optimizer::zero_grad() { flat_.grads.zero_(); }

void Optimizer::zero_grad_releasing_memory() { flat_.grads.zero_releasing_memory_(); }

void Optimizer::load_state(const NamedTensors& saved, int64_t step_count) {
  HG_CHECK(step_count >= 0, "{} state: negative step count {}", name(), step_count);
  const NamedTensors mine = state();
  for (const auto& [key, src] : saved) {
    bool known = false;
    for (const auto& [k, _] : mine) known = known || k == key;
    HG_CHECK(known, "{} state: unexpected entry '{}'", name(), key);
  }
  for (const auto& [key, dst] : mine) {
    const Tensor* src = nullptr;
    for (const auto& [k, t] : saved)
      if (k == key) src = &t;
    if (src == nullptr && missing_state(key, step_count).defined()) continue;
    HG_CHECK(src != nullptr, "{} state: missing entry '{}'", name(), key);
    HG_CHECK(src->defined() && src->shape() == dst.shape(),
             "{} state: entry '{}' is {}, expected shape {}", name(), key, src->describe(),
             shape_str(dst.shape()));
  }
  // Copy only after everything checked, so a bad checkpoint leaves the optimizer untouched.
  for (const auto& [key, dst] : mine) {
    const Tensor* src = nullptr;
    for (const auto& [k, t] : saved)
      if (k == key) src = &t;
    Tensor(dst).copy_(src != nullptr ? *src : missing_state(key, step_count));
  }
  step_count_ = step_count;
}

Tensor Optimizer::missing_state(const std::string&, int64_t) const { return {}; }

void check_adam_options(const AdamWOptions& o, const char* optimizer) {
  HG_CHECK(o.lr >= 0, "{}: learning rate must be non-negative, got {}", optimizer, o.lr);
  HG_CHECK(o.eps >= 0, "{}: eps must be non-negative, got {}", optimizer, o.eps);
  HG_CHECK(o.weight_decay >= 0, "{}: weight decay must be non-negative, got {}", optimizer,
           o.weight_decay);
  HG_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
           "{}: betas must be in [0, 1), got ({}, {})", optimizer, o.beta1, o.beta2);
}

Tensor decayed_offsets(const FlatParameters& flat, double weight_decay, const char* optimizer) {
  const int64_t decayed = weight_decay != 0.0 ? flat.decay_count : 0;
  std::vector<int64_t> offsets;
  for (int64_t o : flat.offsets)
    if (o <= decayed) offsets.push_back(o);
  HG_CHECK(!offsets.empty() && offsets.back() == decayed,
           "{}: the arena's tensor offsets do not include its decay boundary {}", optimizer,
           decayed);
  if (offsets.size() == 1) return {};
  return Tensor::from_vector(offsets, {int64_t(offsets.size())}).to(flat.params.device());
}

DecaySplit split_at_decay(const Tensor& flat, int64_t decay_count) {
  if (!flat.defined()) return {};
  const int64_t n = flat.numel();
  return {flat.narrow(0, 0, decay_count), flat.narrow(0, decay_count, n - decay_count)};
}

}  // namespace hg::optim
