// Module: a piece of a network with named parameters, buffers and child modules. Names are
// dotted paths ("layer1.0.conv1.weight") used by state dicts, checkpoints and the golden test.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/tensor/tensor.h"

namespace hg::nn {

// Whether weight decay applies to a parameter (batch-norm affine parameters and biases are
// commonly excluded).
enum class Decay : uint8_t { Apply, Exempt };

struct NamedParameter {
  std::string name;
  Tensor tensor;
  Decay decay;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  // forward(x), or with its activations recomputed during backward (fn::recompute) when
  // set_recompute(true) was called and the module is training. Containers call their
  // children through this (Sequential does), so a marked child is recomputed.
  Tensor operator()(const Tensor& x);

  // Marks this module for activation recomputation: its forward pass keeps only its input
  // for backward and runs again there. Changes memory and time, not results.
  void set_recompute(bool on);
  bool recompute() const { return recompute_; }

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Recursive, in registration order, with dotted names.
  std::vector<NamedParameter> named_parameters() const;
  NamedTensors named_buffers() const;
  // Parameters then buffers: everything a checkpoint of the model holds.
  NamedTensors state_dict() const;
  // Copies values into the existing tensors (so arena views stay in place). Errors name the
  // missing, unexpected or mis-shaped entries and `source` (a file name, for messages).
  void load_state_dict(const std::map<std::string, Tensor>& state, const std::string& source);
  int64_t num_parameters() const;
  // Moves parameters and buffers to `device` in place.
  void to(Device device);

  // Calls fn on this module, then on every descendant, in registration order.
  void for_each_module(const std::function<void(Module&)>& fn);
  // Every descendant with its dotted name ("layer1.0"), in registration order (not this one).
  std::vector<std::pair<std::string, Module*>> named_modules();

  const std::string& type_name() const { return type_name_; }
  // One line per module, indented: "ResNet", "  stem: Stem", ...
  std::string summary(int indent = 0) const;

 protected:
  Tensor register_parameter(std::string name, Tensor t, Decay decay = Decay::Apply);
  Tensor register_buffer(std::string name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }

 private:
  void collect_parameters(const std::string& prefix, std::vector<NamedParameter>& out) const;
  void collect_buffers(const std::string& prefix, NamedTensors& out) const;

  void collect_modules(const std::string& prefix,
                       std::vector<std::pair<std::string, Module*>>& out);

  std::string type_name_;
  bool training_ = true;
  bool recompute_ = false;
  std::vector<Tensor> recompute_parameters_;  // this module's parameters, when recompute_
  std::vector<NamedParameter> params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Modules applied in order; children are named "0", "1", ... Each child is called through
// Module::operator(), so it can be recomputed.
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential& add(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  Module& at(size_t i) { return *layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// The modules of `model` that train.recompute can name: the children of its Sequential
// containers that have parameters (a ResNet's blocks "layer1.0", "layer1.1", ...), with their
// names, in registration order.
std::vector<std::pair<std::string, Module*>> recompute_candidates(Module& model);

// Marks exactly the named modules of `model` for recomputation (the others unmarked). Throws
// InvalidInput naming `what` (e.g. "train.recompute") and the name that is not one of
// recompute_candidates, listing those.
void set_recompute_modules(Module& model, const std::vector<std::string>& names,
                           const std::string& what);

}  // namespace hg::nn
