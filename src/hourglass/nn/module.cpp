#include "hourglass/nn/module.h"

#include <set>

#include "hourglass/autograd/recompute.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::nn {

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

Tensor Module::register_parameter(std::string name, Tensor t, Decay decay) {
  t.set_requires_grad(true);
  params_.push_back({std::move(name), t, decay});
  return t;
}

Tensor Module::register_buffer(std::string name, Tensor t) {
  buffers_.emplace_back(std::move(name), t);
  return t;
}

void Module::collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) const {
  for (const auto& p : params_) out.push_back({prefix + p.name, p.tensor, p.decay});
  for (const auto& [name, child] : children_) child->collect_parameters(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

std::vector<NamedParameter> Module::named_parameters() const {
  std::vector<NamedParameter> out;
  collect_parameters("", out);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect_buffers("", out);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  for (auto& p : named_parameters()) out.emplace_back(p.name, p.tensor);
  for (auto& b : named_buffers()) out.push_back(b);
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state,
                             const std::string& source) {
  const NamedTensors mine = state_dict();
  for (const auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it == state.end())
      throw_invalid(
          fmt::format("{}: no tensor '{}' for this {} model", source, name, type_name_),
          "the checkpoint was made by a different model; check model.name and its options");
    HG_CHECK(it->second.shape() == t.shape(), "{}: tensor '{}' has shape {}, the model expects {}",
             source, name, shape_str(it->second.shape()), shape_str(t.shape()));
  }
  for (const auto& [name, t] : mine) const_cast<Tensor&>(t).copy_(state.at(name));
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : named_parameters()) n += p.tensor.numel();
  return n;
}

void Module::to(Device device) {
  for (auto& p : params_) {
    if (p.tensor.device() == device) continue;
    Tensor moved = p.tensor.to(device);
    p.tensor.rebind_(moved.storage(), moved.storage_offset());
  }
  for (auto& [name, t] : buffers_) {
    if (t.device() == device) continue;
    Tensor moved = t.to(device);
    t.rebind_(moved.storage(), moved.storage_offset());
  }
  for (auto& [name, child] : children_) child->to(device);
}

std::string Module::summary(int indent) const {
  std::string s = std::string(size_t(indent), ' ') + type_name_ + "\n";
  for (const auto& [name, child] : children_) {
    std::string sub = child->summary(indent + 2);
    s += std::string(size_t(indent + 2), ' ') + name + ": " + sub.substr(size_t(indent + 2));
  }
  return s;
}

Sequential& Sequential::add(std::shared_ptr<Module> m) {
  register_module(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& layer : layers_) y = (*layer)(y);
  return y;
}

}  // namespace hg::nn

namespace hg::nn {

void Module::for_each_module(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [name, child] : children_) child->for_each_module(fn);
}

}  // namespace hg::nn

namespace hg::nn {

Tensor Module::operator()(const Tensor& x) {
  if (!recompute_ || !training_ || !autograd::grad_enabled()) return forward(x);
  return fn::recompute([this](const Tensor& in) { return forward(in); }, x, recompute_parameters_);
}

void Module::set_recompute(bool on) {
  recompute_ = on;
  recompute_parameters_.clear();
  // Handles share their impls with the module's, so the arena's rebinding reaches them.
  if (on)
    for (const NamedParameter& p : named_parameters()) recompute_parameters_.push_back(p.tensor);
}

void Module::collect_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, Module*>>& out) {
  for (auto& [name, child] : children_) {
    out.emplace_back(prefix + name, child.get());
    child->collect_modules(prefix + name + ".", out);
  }
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
  return out;
}

std::vector<std::pair<std::string, Module*>> recompute_candidates(Module& model) {
  std::set<Module*> in_sequential;
  model.for_each_module([&](Module& m) {
    if (auto* seq = dynamic_cast<Sequential*>(&m))
      for (size_t i = 0; i < seq->size(); ++i) in_sequential.insert(&seq->at(i));
  });
  std::vector<std::pair<std::string, Module*>> out;
  for (auto& [name, m] : model.named_modules())
    if (in_sequential.count(m) != 0 && m->num_parameters() > 0) out.emplace_back(name, m);
  return out;
}

void set_recompute_modules(Module& model, const std::vector<std::string>& names,
                           const std::string& what) {
  const auto candidates = recompute_candidates(model);
  std::set<std::string> wanted;
  for (const std::string& name : names) {
    bool known = false;
    for (const auto& c : candidates) known = known || c.first == name;
    if (!known) {
      std::string valid;
      for (const auto& c : candidates) valid += (valid.empty() ? "" : ", ") + c.first;
      throw_invalid(
          fmt::format("{}: '{}' is not a block of this {} model that can be recomputed", what,
                      untrusted_excerpt(name), model.type_name()),
          valid.empty()
              ? std::string("this model has no blocks to recompute; use \"none\"")
              : fmt::format("name blocks among: {} (or use \"auto\" or \"none\")", valid));
    }
    wanted.insert(name);
  }
  model.for_each_module([](Module& m) {
    if (m.recompute()) m.set_recompute(false);
  });
  for (const auto& [name, m] : candidates) m->set_recompute(wanted.count(name) != 0);
}

}  // namespace hg::nn
