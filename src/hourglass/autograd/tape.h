// The autograd tape: differentiable functions (functions.h) record one node per coarse op as
// they run; backward() replays the nodes in reverse, passing gradients from each node's output
// to its inputs and accumulating into the gradients of leaves (parameters). The tape belongs to
// the thread that records it and is cleared by backward().
#pragma once

#include <functional>
#include <vector>

#include "hourglass/tensor/tensor.h"

namespace hg::autograd {

// Computes the gradients of a node's inputs from the gradient of its output; an undefined
// entry means "no gradient for this input".
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  const char* name;
  std::vector<Tensor> inputs;   // kept alive so their identities stay valid
  Tensor output;
  BackwardFn backward;
};

class Tape {
 public:
  static Tape& current();   // this thread's tape

  // True when an op on these inputs should be recorded (grad mode on, an input needs grad).
  bool should_record(std::initializer_list<const Tensor*> inputs) const;
  // Records a node and marks `output` as requiring grad (non-leaf).
  void record(const char* name, std::vector<Tensor> inputs, Tensor& output, BackwardFn backward);

  // Backpropagates from a scalar `root` (seeded with `seed`, default 1) and clears the tape.
  void backward(const Tensor& root, const Tensor& seed = Tensor());
  void clear() { nodes_.clear(); }
  size_t size() const { return nodes_.size(); }

 private:
  std::vector<Node> nodes_;
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

// Backpropagates from a scalar loss through the current thread's tape.
void backward(const Tensor& loss);

}  // namespace hg::autograd
