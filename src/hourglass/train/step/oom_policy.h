// Out-of-memory recovery for training steps, and the "auto" micro-batch search.
//
// A training step splits its batch into micro-batches and accumulates their gradients; memory
// grows with the micro-batch (activations), not with the effective batch. So when a step runs
// out of device memory the remedy that keeps the run's meaning is to halve the micro-batch and
// double the number of micro-batches: the accumulated gradient, the effective batch and the
// learning dynamics stay the same (exactly so for models without batch norm, whose statistics
// then come from smaller micro-batches). MicroBatchPlan holds the current micro-batch size,
// accumulate_with_oom_retry runs a step's forward/backward under it and shrinks it on
// OutOfMemory, and find_max_micro_batch probes the largest micro-batch before training starts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/base/error.h"
#include "hourglass/device/allocator.h"
#include "hourglass/nn/flat_parameters.h"
#include "hourglass/nn/module.h"

namespace hg::train {

class TrainStep;

// Checkpoint metadata key holding MicroBatchPlan::save(), so a resumed run keeps a micro-batch
// that an out-of-memory recovery shrank.
inline constexpr const char* kMicroBatchMetadataKey = "hourglass.micro_batch";

// train.micro_batch = "auto" in a config, as parse_micro_batch returns it.
inline constexpr int64_t kAutoMicroBatch = -1;

// Rows [begin, end) of micro-batch k of `parts` over a batch of n: the trainer's split,
// n*k/parts .. n*(k+1)/parts, so the sizes differ by at most one.
struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
RowRange micro_batch_rows(int64_t n, int64_t parts, int64_t k);

// How a step splits its batch: micro-batches of at most micro_batch_size() rows.
class MicroBatchPlan {
 public:
  // Throws InvalidInput unless micro_batch_size >= 1.
  explicit MicroBatchPlan(int64_t micro_batch_size);
  // The plan train.grad_accum describes: ceil(batch_size / grad_accum) rows, which splits a
  // full batch into exactly grad_accum micro-batches when grad_accum divides batch_size.
  static MicroBatchPlan from_grad_accum(int64_t batch_size, int64_t grad_accum);

  int64_t micro_batch_size() const { return micro_; }
  // Micro-batches for a batch of `batch` rows: ceil(batch / micro_batch_size()), at least 1.
  // A short last batch gets fewer micro-batches, none larger than micro_batch_size().
  int64_t micro_batches(int64_t batch) const;

  // After an OutOfMemory `oom`: records the size that failed and why, and halves the
  // micro-batch (rounding up, so 3 -> 2 -> 1). Returns false when it was already 1.
  bool shrink(const Error& oom);
  // Micro-batch sizes that ran out of memory during the run, in order, and the last
  // failure's message.
  const std::vector<int64_t>& failed_sizes() const { return failed_; }
  const std::string& last_failure() const { return last_failure_; }

  // The state a checkpoint keeps (under kMicroBatchMetadataKey): the micro-batch size as text.
  std::string save() const { return std::to_string(micro_); }
  // The plan to resume with: the smaller of the configured micro-batch and the `saved` one
  // (a run that shrank keeps its smaller micro-batch). An empty `saved` (a checkpoint written
  // before this key existed) gives `configured`. `searched` says the configured size was found
  // by a memory search (train.micro_batch = "auto"), which another machine may have ended
  // elsewhere: then any size up to `batch_rows` can have been saved. Otherwise only the sizes
  // that halving (shrink) reaches from `configured` can. Throws InvalidInput naming `source`,
  // the key and the value when `saved` is not a positive integer or is a size no run of this
  // config writes (an edited checkpoint would change the micro-batches' batch statistics).
  static MicroBatchPlan restore(std::string_view saved, const MicroBatchPlan& configured,
                                bool searched, int64_t batch_rows, const std::string& source);

 private:
  int64_t micro_;
  std::vector<int64_t> failed_;
  std::string last_failure_;
};

// What recovering from an out-of-memory step needs besides the plan.
struct OomRecovery {
  Allocator* allocator = nullptr;   // the step's device allocator: its cache is emptied
  std::function<void()> zero_grad;  // zeroes the partially accumulated gradients (required)
  // Optional: undoes the failed attempt's other effects before the retry. Without it the
  // micro-batches that ran before the failure have moved the batch-norm running statistics
  // once (an extra EMA update from the same batch's data, harmless in practice).
  std::function<void()> rollback;
  bool batch_norm = false;  // the model normalises over the batch (for the warning)
};

// A copy of a model's buffers (batch-norm running statistics: a few KiB per layer) that can be
// written back: the rollback a caller may give OomRecovery so a retried step leaves the
// running statistics exactly as an uninterrupted one would. save() and restore() copy
// without allocating, so restore() is safe right after an out-of-memory failure.
class BufferSnapshot {
 public:
  // Allocates the copies and saves. When the model's buffers all live in `flat_buffers` (the
  // arena's FlatParameters::buffers), the snapshot is one copy of that block.
  explicit BufferSnapshot(const nn::Module& model, const Tensor& flat_buffers = Tensor());
  void save();
  void restore();

 private:
  std::vector<std::pair<Tensor, Tensor>> buffers_;  // (the model's buffer, its copy)
};

// True when the model has batch-norm layers (buffers named *.running_mean).
bool has_batch_norm(const nn::Module& model);

// Frees what a failed or finished attempt left: the thread's autograd tape and the allocator's
// cached blocks.
void release_step_memory(Allocator& allocator);

namespace detail {
// Handles one OutOfMemory of step `step` (a batch of `batch_size` rows): releases memory,
// zeroes the gradients, shrinks the plan and logs a warning; throws the final OutOfMemory
// Error when the plan is at micro-batch 1.
void recover_from_oom(MicroBatchPlan& plan, const OomRecovery& recovery, int64_t step,
                      int64_t batch_size, const Error& oom);
}  // namespace detail

// Runs accumulate(micro_batch_size) — the forward and backward passes over every micro-batch
// of one batch of `batch_size` rows, accumulating into the zeroed gradient buffer — and, when
// it throws an OutOfMemory Error, frees memory, zeroes the gradients, halves the plan's
// micro-batch and runs it again, until it succeeds or micro-batch 1 fails (then the Error
// says what was tried and what to do; the gradients are zeroed). Other exceptions propagate
// untouched. `step` only labels the log.
//
// accumulate must be restartable: it may run several times for one batch, so it commits
// nothing outside the gradients until it returns (keep per-step metrics local and add them to
// the epoch's totals afterwards). The optimizer update stays outside: it is not restartable
// (step() counts before it updates) and its memory does not depend on the micro-batch.
template <class AccumulateFn>
void accumulate_with_oom_retry(MicroBatchPlan& plan, const OomRecovery& recovery, int64_t step,
                               int64_t batch_size, AccumulateFn&& accumulate) {
  for (;;) {
    try {
      accumulate(plan.micro_batch_size());
      return;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      // The attempt's activations were released by unwinding to here; the tape's nodes and
      // the gradients are what is left.
      detail::recover_from_oom(plan, recovery, step, batch_size, e);
    }
  }
}

// ---- choosing the micro-batch before training ----

// Parses train.micro_batch: absent gives ceil(batch_size / grad_accum) (today's behaviour),
// "auto" gives kAutoMicroBatch, an integer must lie in [1, batch_size]. Setting it together
// with train.grad_accum is an error (they say the same thing). Errors are InvalidInput naming
// the key and the config's source.
int64_t parse_micro_batch(const Config& config, int64_t batch_size, int64_t grad_accum);

// One forward and backward pass at a micro-batch size, leaving nothing behind (gradients
// zeroed, model buffers unchanged); throws OutOfMemory when it does not fit.
using StepProbe = std::function<void(int64_t micro_batch_size)>;

// The largest micro-batch in [1, upper_bound] that fits: probes upper_bound, halves on
// OutOfMemory until a size fits, then bisects between the last fit and the first failure with
// at most `refine_probes` more probes (three narrow the gap eightfold). Memory is
// released after every probe. Assuming memory grows with the micro-batch, the result fits and,
// unless it is upper_bound, twice it does not (the first failure is at most twice the last
// fit). Throws OutOfMemory when micro-batch 1 does not fit; other errors from the probe
// propagate.
int64_t find_max_micro_batch(const StepProbe& probe, int64_t upper_bound, Allocator& allocator,
                             int refine_probes = 3);

// A probe that runs `step`'s forward and backward as a training step does (its precision,
// its autocast policy): a zero-filled f32 batch [batch_size, sample_shape...] (sample_shape is
// H, W, C) with i64 labels is allocated on the step's device, because the whole batch is there
// during a real step; its first micro_batch_size rows go through TrainStep::forward_backward.
// Afterwards the gradients are zeroed and the model's buffers (batch-norm running statistics)
// restored from a copy taken when the probe was made, so probing does not change the run:
// make it right before the search and drop it after. Leaves the model in training mode.
StepProbe make_training_probe(TrainStep& step, const Shape& sample_shape, int64_t batch_size);

}  // namespace hg::train
