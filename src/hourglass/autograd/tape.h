// The autograd tape: differentiable functions (functions.h) record one node per coarse op as
// they run; backward() replays the nodes in reverse, passing gradients from each node's output
// to its inputs and accumulating into the gradients of leaves (parameters). The tape belongs to
// the thread that records it and is cleared by backward().
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "hourglass/tensor/tensor.h"

namespace hg::autograd {

// Computes the gradients of a node's inputs from the gradient of its output; an undefined
// entry means "no gradient for this input".
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;
// The same from an output gradient in two parts, grad_a + grad_b, for a node whose backward
// sums them more cheaply than an add of their own would (batch_norm_relu with a residual sums
// them while loading). Its result is the BackwardFn's of ops::add(grad_a, grad_b), bit for bit.
using BackwardSumFn =
    std::function<std::vector<Tensor>(const Tensor& grad_a, const Tensor& grad_b)>;

// Called during backward with a leaf (a parameter) whose gradient is final: no node still to
// run takes it as an input. Data parallelism starts reducing a bucket of gradients from here
// while backward goes on with the layers before it.
using LeafReadyFn = std::function<void(const Tensor& leaf)>;

// What a node remembers of an input: its identity, and the tensor itself only for leaves
// (parameters, whose gradient slot backward accumulates into). Intermediate values are not kept
// alive by the tape: only what a backward function saved is, as in PyTorch, so a value no
// backward needs (a batch-norm output consumed by a relu) is freed during the forward pass.
struct NodeInput {
  uint64_t id = 0;  // TensorImpl::id; 0 for an undefined input
  bool requires_grad = false;
  Shape shape;
  Tensor leaf;  // defined for leaves that require a gradient
};

struct Node {
  const char* name;
  std::vector<NodeInput> inputs;
  uint64_t output_id = 0;
  BackwardFn backward;
  BackwardSumFn backward_sum;  // optional
  // A dtype cast (record_cast): its backward is the gradient cast back to the input's dtype,
  // which a batched leaf accumulation does while adding (ops::batched_leaf_gradients).
  bool is_cast = false;
};

class Tape {
 public:
  // The tape this thread records on: its own, or the one a TapeScope put in place.
  static Tape& current();

  // True when an op on these inputs should be recorded (grad mode on, an input needs grad).
  bool should_record(std::initializer_list<const Tensor*> inputs) const;
  // Records a node and marks `output` as requiring grad (non-leaf). With `backward_sum`, an
  // output whose gradient arrives in two parts (a value used twice) is handed both parts
  // rather than their sum; with three or more parts, the first are added in their order of
  // arrival and the last two handed over, as plain accumulation would have added them.
  void record(const char* name, std::vector<Tensor> inputs, Tensor& output, BackwardFn backward,
              BackwardSumFn backward_sum = nullptr);
  // Records `output` = input converted to output's dtype (fn::cast).
  void record_cast(const Tensor& input, Tensor& output);

  // Backpropagates from a scalar `root` (seeded with `seed`, default 1) and clears the tape.
  // `leaf_ready` (optional) is called once per leaf the tape reaches, as soon as its gradient
  // is final; leaves the loss does not depend on are reported too, after their last node.
  // Without it (and with ops::batched_leaf_gradients()), gradients reaching leaves whose grad
  // slot is defined are added at the end, all in one ops::accumulate_: the same additions in
  // the same order per leaf.
  void backward(const Tensor& root, const Tensor& seed = Tensor(),
                const LeafReadyFn& leaf_ready = nullptr);
  // Backpropagates from `root` (any shape) seeded with `seed` (root's shape), accumulating
  // into the leaves as backward() does, and returns the gradients that reached `inputs`:
  // non-leaf values that require a gradient (undefined where none arrived). Clears the tape.
  // What a recomputed block's nested tape runs (fn::recompute).
  std::vector<Tensor> backward_to(const Tensor& root, const Tensor& seed,
                                  const std::vector<Tensor>& inputs);
  void clear() { nodes_.clear(); }
  size_t size() const { return nodes_.size(); }

 private:
  void run_backward(const Tensor& root, const Tensor& seed, const LeafReadyFn& leaf_ready,
                    const std::vector<Tensor>* inputs, std::vector<Tensor>* input_grads);

  std::vector<Node> nodes_;
};

// Makes `tape` the thread's current tape for its lifetime (nested tapes: a recomputed block
// records its forward pass on a tape of its own during the outer backward).
class TapeScope {
 public:
  explicit TapeScope(Tape& tape);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* previous_;
};

// True while a recomputed block re-runs its forward pass during backward (fn::recompute).
// Layers with side effects in training mode skip them then: batch norm does not update its
// running statistics a second time.
bool recomputing();
class RecomputeGuard {
 public:
  RecomputeGuard();
  ~RecomputeGuard();
  RecomputeGuard(const RecomputeGuard&) = delete;
  RecomputeGuard& operator=(const RecomputeGuard&) = delete;

 private:
  bool previous_;
};

// Whether operations are recorded on this thread.
bool grad_enabled();

// Disables recording for its lifetime (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Backpropagates from a scalar loss through the current thread's tape. `seed` (a scalar of the
// loss's dtype and device) is the gradient the loss starts with: 1 by default, the loss scale
// under dynamic loss scaling (so the scaled loss is never materialised).
void backward(const Tensor& loss, const Tensor& seed = Tensor(),
              const LeafReadyFn& leaf_ready = nullptr);

// Mixed precision by policy: while an AutocastGuard with a compute dtype (bf16 or f16) is alive
// on this thread, fn::conv2d and fn::linear cast their floating operands to it (differentiably:
// gradients flow back in the operands' own dtypes, so f32 master weights get f32 gradients),
// and fn::cross_entropy computes in f32. Batch-norm keeps f32 statistics and parameters;
// activations between layers stay in the compute dtype. An undefined compute dtype (the
// default) turns the policy off.
//
// `copies` (optional) holds parameters already in the compute dtype, by the parameter's tensor
// id (TensorImpl::id): views into one compute-dtype copy of the whole parameter arena, which
// the training step converts in one kernel before its forward (train_step.h). A parameter
// found there is not cast again: the op takes a fresh view of its copy, recorded as the cast
// would be, so its gradient reaches the f32 parameter the same way. The values are the cast's,
// bit for bit; the copies must have been converted from the parameters' current values.
using CastCopies = std::unordered_map<uint64_t, Tensor>;
struct AutocastPolicy {
  bool enabled = false;
  DType compute = DType::F32;
  const CastCopies* copies = nullptr;
};
const AutocastPolicy& autocast();
class AutocastGuard {
 public:
  explicit AutocastGuard(AutocastPolicy policy);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastPolicy previous_;
};

}  // namespace hg::autograd
