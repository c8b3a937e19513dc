// Gradient buckets: the flat gradient arena cut into contiguous ranges of whole parameters, each
// reported ready as soon as backward has produced the final gradient of every parameter in it,
// so data parallelism can reduce the gradients of the last layers while backward still runs
// through the first ones (PyTorch DDP's buckets, over one arena instead of copies).
//
// The cut follows the arena's order (parameter_arena.h), from its end. The decay block (weights,
// in model order) and the block after it (batch-norm parameters and biases, when the model
// exempts them from weight decay) are cut separately: the decay block's buckets become ready
// one after another as backward goes from the last layer to the first, while the small block
// after it is ready only when backward reaches the first layer. A parameter larger than the
// bucket size is a bucket of its own.
// Every rank builds the same buckets from the same model and sees them ready in the same
// order, which is what lets each rank issue the same collectives in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "hourglass/nn/flat_parameters.h"
#include "hourglass/nn/module.h"

namespace hg::train {

// A contiguous range of the flat gradient buffer whose values are final for this step.
struct GradientBucket {
  Tensor grads;        // a view of the arena's gradients: reduce it in place
  int64_t offset = 0;  // its first element's index in the arena
};

class GradientBuckets {
 public:
  // Buckets of about `bucket_bytes` of f32 gradients (>= 1) over `flat`, which must hold every
  // parameter of `model` (build_parameter_arena).
  GradientBuckets(const nn::Module& model, const FlatParameters& flat, int64_t bucket_bytes);

  int64_t size() const { return int64_t(buckets_.size()); }
  // Bucket k's range of the arena (k = 0 first ready in backward order).
  const GradientBucket& bucket(int64_t k) const { return buckets_[size_t(k)]; }

  // Starts a step's backward: every bucket waits for all of its parameters again.
  void begin(const std::function<void(GradientBucket&)>& ready);
  // A parameter's gradient is final (autograd::LeafReadyFn). Reports each bucket it completes,
  // in completion order. Tensors that are not parameters of the arena are ignored.
  void leaf_ready(const Tensor& leaf);
  // After backward: reports the buckets still waiting (parameters the loss did not reach), in
  // bucket order, and ends the step.
  void finish();

 private:
  void complete(size_t k);

  std::vector<GradientBucket> buckets_;
  std::vector<int64_t> parameters_in_;  // per bucket: parameters it holds
  std::vector<int64_t> waiting_;        // per bucket: parameters not yet final this step
  std::vector<bool> reported_;
  std::unordered_map<const void*, size_t> bucket_of_;  // a parameter's data -> its bucket
  std::function<void(GradientBucket&)> ready_;
};

}  // namespace hg::train
