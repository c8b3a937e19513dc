#include "hourglass/autograd/tape.h"

#include <set>
#include <unordered_map>
#include <utility>

#include "hourglass/ops/ops.h"

namespace hg::autograd {

namespace {
thread_local bool t_grad_enabled = true;
}

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

namespace {
Tape& own_tape() {
  thread_local Tape tape;
  return tape;
}
thread_local Tape* t_current = nullptr;  // null: the thread's own
thread_local bool t_recomputing = false;
}  // namespace

Tape& Tape::current() { return t_current != nullptr ? *t_current : own_tape(); }

TapeScope::TapeScope(Tape& tape) : previous_(t_current) { t_current = &tape; }
TapeScope::~TapeScope() { t_current = previous_; }

bool recomputing() { return t_recomputing; }
RecomputeGuard::RecomputeGuard() : previous_(t_recomputing) { t_recomputing = true; }
RecomputeGuard::~RecomputeGuard() { t_recomputing = previous_; }

bool Tape::should_record(std::initializer_list<const Tensor*> inputs) const {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

void Tape::record(const char* name, std::vector<Tensor> inputs, Tensor& output, BackwardFn backward,
                  BackwardSumFn backward_sum) {
  TensorImpl* impl = output.impl_ptr();
  impl->requires_grad = true;
  impl->is_leaf = false;
  std::vector<NodeInput> refs(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    if (!t.defined()) continue;
    NodeInput& r = refs[k];
    r.id = t.impl_ptr()->id;
    r.requires_grad = t.requires_grad();
    r.shape = t.shape();
    if (r.requires_grad && t.is_leaf()) r.leaf = t;
  }
  nodes_.push_back(
      Node{name, std::move(refs), impl->id, std::move(backward), std::move(backward_sum)});
}

void Tape::record_cast(const Tensor& input, Tensor& output) {
  const DType source = input.dtype();
  record("cast", {input}, output,
         [source](const Tensor& dy) { return std::vector<Tensor>{dy.to(source)}; });
  nodes_.back().is_cast = true;
}

namespace {
// Gradients of leaves waiting to be added to their grad slots, in arrival order; a second
// gradient for a slot already waiting adds the waiting ones first (accumulate_ takes distinct
// destinations), so every slot sees its additions in the order they arrived.
class LeafAccumulation {
 public:
  void add(const Tensor& slot, const Tensor& g) {
    // Keyed by place, not address: a slot's memory may be taken only when the sums are added
    // (a released gradient arena, Optimizer::zero_grad).
    const std::pair<const void*, int64_t> place{slot.impl_ptr()->storage.get(),
                                                slot.storage_offset()};
    if (!pending_.insert(place).second) {
      flush();
      pending_.insert(place);
    }
    dsts_.push_back(slot);
    srcs_.push_back(g);
  }
  void flush() {
    if (dsts_.empty()) return;
    ops::accumulate_(dsts_, srcs_);
    dsts_.clear();
    srcs_.clear();
    pending_.clear();
  }

 private:
  std::vector<Tensor> dsts_, srcs_;
  std::set<std::pair<const void*, int64_t>> pending_;
};

// The gradient that has reached a non-leaf value so far: `sum`, and where the value's node can
// take its gradient in two parts (Node::backward_sum), a last part `pending` not yet added.
struct GradSlot {
  Tensor sum, pending;
  bool defer = false;  // the node has a backward_sum: keep the last part apart

  // Adds g. Out of place: the same gradient tensor may have been handed to several inputs
  // (add's backward passes its grad to both operands).
  void accumulate(const Tensor& g) {
    if (!sum.defined()) {
      sum = g;
      return;
    }
    if (!defer) {
      sum = ops::add(sum, g);
    } else {
      if (pending.defined()) sum = ops::add(sum, pending);
      pending = g;
    }
  }
  // The whole gradient: the same additions in the same order as without deferring.
  Tensor total() const { return pending.defined() ? ops::add(sum, pending) : sum; }
};
}  // namespace

void Tape::backward(const Tensor& root, const Tensor& seed, const LeafReadyFn& leaf_ready) {
  run_backward(root, seed, leaf_ready, nullptr, nullptr);
}

std::vector<Tensor> Tape::backward_to(const Tensor& root, const Tensor& seed,
                                      const std::vector<Tensor>& inputs) {
  HG_CHECK(seed.defined() && seed.shape() == root.shape(),
           "backward_to: the seed {} must have the root's shape {}", seed.describe(),
           root.describe());
  for (const Tensor& t : inputs)
    HG_CHECK(!t.defined() || !t.requires_grad() || !t.is_leaf(),
             "backward_to: input {} is a leaf (its gradient goes to its grad slot)", t.describe());
  std::vector<Tensor> grads;
  run_backward(root, seed, nullptr, &inputs, &grads);
  return grads;
}

void Tape::run_backward(const Tensor& root, const Tensor& seed, const LeafReadyFn& leaf_ready,
                        const std::vector<Tensor>* inputs, std::vector<Tensor>* input_grads) {
  HG_CHECK(root.requires_grad(), "backward: the loss {} does not depend on any parameter",
           root.describe());
  HG_CHECK(seed.defined() || root.numel() == 1, "backward: the loss must be a scalar, got {}",
           root.describe());
  // Gradients of non-leaf values, keyed by identity. Freed as soon as their node has run.
  std::unordered_map<uint64_t, GradSlot> grads;
  // Move the nodes out so the tape is clear even if a backward throws.
  std::vector<Node> nodes = std::move(nodes_);
  nodes_.clear();
  for (const Node& node : nodes)
    if (node.backward_sum) grads[node.output_id].defer = true;
  grads[root.impl_ptr()->id].sum =
      seed.defined() ? seed : Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
  // For leaf_ready: the leaves whose last node in backward order (their first use in forward
  // order) is node i, keyed by i.
  std::unordered_map<size_t, std::vector<Tensor>> leaves_done_at;
  if (leaf_ready) {
    std::unordered_map<uint64_t, size_t> first_use;
    for (size_t i = 0; i < nodes.size(); ++i)
      for (const NodeInput& input : nodes[i].inputs)
        if (input.leaf.defined() && first_use.emplace(input.id, i).second)
          leaves_done_at[i].push_back(input.leaf);
  }
  auto report_leaves = [&](size_t i) {
    if (leaves_done_at.empty()) return;
    auto done = leaves_done_at.find(i);
    if (done == leaves_done_at.end()) return;
    for (const Tensor& leaf : done->second) leaf_ready(leaf);
    leaves_done_at.erase(done);
  };
  // Leaf gradients batched into one accumulate_ at the end, unless leaves are reported as they
  // become final.
  const bool batch_leaves = !leaf_ready && ops::batched_leaf_gradients();
  LeafAccumulation leaf_grads;
  for (size_t i = nodes.size(); i-- > 0;) {
    Node& node = nodes[i];
    auto it = grads.find(node.output_id);
    if (it == grads.end() || !it->second.sum.defined()) {  // output did not influence the loss
      if (it != grads.end()) grads.erase(it);
      report_leaves(i);
      continue;
    }
    GradSlot slot = std::move(it->second);
    grads.erase(it);
    // A parameter cast to the autocast dtype: the accumulation converts the gradient back.
    if (batch_leaves && node.is_cast && !slot.pending.defined() && node.inputs.size() == 1 &&
        node.inputs[0].leaf.defined() && node.inputs[0].leaf.grad().defined()) {
      leaf_grads.add(node.inputs[0].leaf.grad(), slot.sum);
      node = Node{};
      continue;
    }
    std::vector<Tensor> input_grads = slot.pending.defined()
                                          ? node.backward_sum(slot.sum, slot.pending)
                                          : node.backward(slot.sum);
    HG_ASSERT(input_grads.size() == node.inputs.size(),
              "{} backward returned {} grads for {} inputs", node.name, input_grads.size(),
              node.inputs.size());
    for (size_t k = 0; k < input_grads.size(); ++k) {
      NodeInput& input = node.inputs[k];
      const Tensor& g = input_grads[k];
      if (!g.defined() || input.id == 0 || !input.requires_grad) continue;
      HG_ASSERT(g.shape() == input.shape, "{} backward: grad {} for input of shape {}", node.name,
                g.describe(), shape_str(input.shape));
      if (input.leaf.defined()) {
        Tensor slot = input.leaf.grad();
        if (slot.defined() && batch_leaves) {
          leaf_grads.add(slot, g);
        } else if (slot.defined()) {
          ops::add_(slot, g);
        } else {
          input.leaf.set_grad(g.clone());
        }
      } else {
        grads[input.id].accumulate(g);
      }
    }
    // Drop saved tensors early to return activation memory while backward proceeds.
    node = Node{};
    report_leaves(i);
  }
  leaf_grads.flush();
  if (inputs != nullptr) {  // no node produces these, so their gradients are complete
    input_grads->clear();
    for (const Tensor& t : *inputs) {
      auto it = t.defined() ? grads.find(t.impl_ptr()->id) : grads.end();
      input_grads->push_back(it == grads.end() ? Tensor() : it->second.total());
    }
  }
}

void backward(const Tensor& loss, const Tensor& seed, const LeafReadyFn& leaf_ready) {
  Tape::current().backward(loss, seed, leaf_ready);
}

namespace {
thread_local AutocastPolicy t_autocast;
}  // namespace

const AutocastPolicy& autocast() { return t_autocast; }

AutocastGuard::AutocastGuard(AutocastPolicy policy) : previous_(t_autocast) {
  HG_CHECK(!policy.enabled || is_floating(policy.compute),
           "autocast: compute dtype must be a floating dtype, got {}", dtype_name(policy.compute));
  t_autocast = policy;
}
AutocastGuard::~AutocastGuard() { t_autocast = previous_; }

}  // namespace hg::autograd
