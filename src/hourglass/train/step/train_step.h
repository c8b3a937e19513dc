// The training step: the one place where forward, backward and the optimizer update are strung
// together. `hourglass train`, `bench`, `plan` and the out-of-memory probe all run it.
//
// One step on a batch (images [N,H,W,C] f32, labels [N] i64, on the step's device; or any
// inputs and targets of N rows with StepOptions::loss):
//   1. the learning rate of the schedule for this step (a pure function of the step count);
//   2. with mixup or cutmix (StepOptions::mixing), the batch mixed with itself reversed
//      (batch_mixing.h); forward, cross-entropy and backward over the batch's micro-batches
//      (MicroBatchPlan),
//      under the context's autocast policy (in bf16 and f16 the parameter arena converted to
//      the compute dtype in one kernel first, the layers taking views of that copy instead of
//      casting their weights: ops::arena_weight_cast), each micro-batch's loss weighted by its
//      share of the batch so the accumulated gradient is the whole batch's; dropout masks keyed by
//      (seed, step, batch row); on OutOfMemory the step is rolled back and retried with half
//      the micro-batch (oom_policy.h);
//   3. the gradients-ready hook (all-reduce);
//   4. fp16: unscale and check for inf/NaN; clipping by the global norm; the optimizer update
//      (skipped on the device after an overflow); the loss-scale update; zeroing the gradients.
// The step's loss sum and correct count stay on the device: nothing in a step waits for the
// host, which is what lets the device work of a step be captured and replayed as a graph
// (step_graph.h: on a GPU with options.graph Auto, from a shape's third step on).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "hourglass/autograd/tape.h"
#include "hourglass/nn/module.h"
#include "hourglass/optim/mixed_precision.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/optim/schedule.h"
#include "hourglass/train/step/batch_mixing.h"
#include "hourglass/train/step/execution_context.h"
#include "hourglass/train/step/gradient_buckets.h"
#include "hourglass/train/step/oom_policy.h"
#include "hourglass/train/step/step_graph.h"

namespace hg::train {

// The loss of one micro-batch: the mean over its rows of a per-row loss (the step weights it
// by the rows' share of the batch), from the model, the micro-batch's inputs and its targets
// (the rows of run()'s `images` and `labels`, any shapes with the rows first). A reinforcement-
// learning objective packs what it needs per row (the action taken, the old log-probability,
// the advantage, ...) into the targets.
using StepLoss =
    std::function<Tensor(nn::Module& model, const Tensor& inputs, const Tensor& targets)>;

struct StepOptions {
  // Null: softmax cross-entropy of the model's output against i64 labels [N] (with
  // label_smoothing), which also counts the correct rows (StepSums::correct).
  StepLoss loss;
  double label_smoothing = 0;
  // Mixup and cutmix of the batch and the loss (batch_mixing.h; images [N,H,W,C]): only with
  // the cross-entropy loss. The correct count is then against each row's own label.
  BatchMixing mixing;
  double clip_grad_norm = 0;  // > 0: clip the global gradient norm to this
  int64_t micro_batch = 0;    // rows per micro-batch (>= 1; the batch size: no split)
  const optim::LrSchedule* schedule = nullptr;  // null: the optimizer's rate stays as set
  GraphMode graph = GraphMode::Auto;            // whole-step graph replay on a GPU
  // Blocks whose activations are recomputed during backward (train.recompute; names from
  // nn::recompute_candidates). Changes memory and time, not results.
  std::vector<std::string> recompute;
};

// The parts of a step, for per-phase timing. Forward and Backward repeat per micro-batch.
enum class StepPhase { Forward, Backward, Update };
const char* step_phase_name(StepPhase phase);
enum class PhaseEdge { Begin, End };

// Where later layers hook into the step. Every hook is optional.
struct StepHooks {
  // Called when a bucket of gradients is final, before unscaling, clipping and the update
  // (data parallelism starts its all-reduce here). Without use_gradient_buckets() the bucket
  // is the whole arena, once per step, after the last micro-batch's backward; with it, each
  // bucket as soon as the last micro-batch's backward has produced it.
  std::function<void(GradientBucket&)> gradients_ready;
  // Called after the step's last gradients_ready, before the update reads the gradients
  // (data parallelism waits for its reductions here).
  std::function<void()> gradients_done;
  // Called at the beginning and end of each phase (timers, profiler ranges). Phases issue
  // device work asynchronously: a timer that wants device time records events here.
  std::function<void(StepPhase, PhaseEdge)> phase;
  // Wraps all the device work of one step (everything after the batch is on the device and
  // the learning rate is set): the default calls `issue` once. Graph capture records `issue`
  // once into a graph and replays it afterwards.
  std::function<void(const std::function<void()>& issue)> device_work;
};

// The step's sums over the batch, f32 scalars on the device, overwritten by each step.
struct StepSums {
  Tensor loss;     // sum over rows of the (label-smoothed) cross-entropy, or StepOptions::loss
  Tensor correct;  // rows whose arg-max is the label (0 with StepOptions::loss)
};

class TrainStep {
 public:
  // `model`'s parameters live in `optimizer`'s flat arena. For fp16 the step makes a loss
  // scaler and hands its overflow flag to the optimizer.
  TrainStep(nn::Module& model, optim::Optimizer& optimizer, ExecutionContext context,
            StepOptions options);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One optimizer step on a batch already on the device. Returns this step's sums (device
  // tensors, valid until the next call). Throws OutOfMemory (gradients zeroed, nothing
  // updated) when even micro-batch 1 does not fit.
  //
  // `global_rows` (0: the batch's own rows) is the number of rows of the whole step when this
  // batch is one rank's part of it (data parallelism): each row's loss is weighted by
  // 1 / global_rows, so the sum of the ranks' gradients is the whole batch's. A rank's part
  // may then be empty (a last batch with fewer rows than ranks): it adds no gradient but
  // still reports every bucket.
  const StepSums& run(const Tensor& images, const Tensor& labels, int64_t global_rows = 0);

  // Reports the gradients in buckets of about `bucket_bytes` as backward produces them
  // (gradient_buckets.h) instead of the whole arena after it. Out-of-memory retries are then
  // off: every rank must issue the same reductions, and a retry on one rank would repeat them.
  void use_gradient_buckets(int64_t bucket_bytes);
  const GradientBuckets* gradient_buckets() const { return buckets_.get(); }

  // Forward and backward of `images` as one micro-batch with weight 1, accumulating into the
  // gradients, under the step's context and with the step's compute-dtype weights (so its
  // memory is the step's); nothing else changes except the model's batch-norm running
  // statistics. For the out-of-memory probe (make_training_probe) and the warm-up.
  void forward_backward(const Tensor& images, const Tensor& labels);

  // Recomputes exactly these blocks from the next step on (nn::set_recompute_modules; an
  // unknown name is an InvalidInput error naming train.recompute and the valid blocks). Call
  // it before the first step: graphs captured earlier would keep the old choice.
  void set_recompute(const std::vector<std::string>& modules);
  // The blocks recomputed, in model order.
  const std::vector<std::string>& recompute_modules() const { return recompute_; }

  // The learning-rate schedule from the next step on (null: the optimizer's rate stays as
  // set). The start-up builds the step before the loaders that size the schedule.
  void set_schedule(const optim::LrSchedule* schedule) { options_.schedule = schedule; }

  StepHooks& hooks() { return hooks_; }
  const ExecutionContext& context() const { return context_; }
  MicroBatchPlan& micro_batch_plan() { return plan_; }
  // The fp16 loss scaler, or null.
  optim::LossScaler* loss_scaler() { return scaler_.get(); }
  // The mean loss of the last micro-batch run (device scalar; for progress displays).
  const Tensor& last_loss() const { return last_loss_; }
  nn::Module& model() { return model_; }
  optim::Optimizer& optimizer() { return optimizer_; }
  // Zeroes the gradients as this step's engine settings say (engine.release_gradients: holding
  // no memory until the next backward writes them). Allocates nothing: safe after an
  // out-of-memory failure.
  void zero_gradients();
  // The graph replay of this step, or null (options.graph Off, or a device without graphs).
  const StepGraph* graph() const { return graph_.get(); }
  // Why this step must run eagerly now ("" when it may be captured or replayed).
  std::string eager_reason() const;
  // The last step's mixup or cutmix draw (no mixing: weight 1, an empty box).
  const MixDraw& mix_draw() const { return mix_; }

 private:
  bool capture(const StepShape& shape, const Tensor& images, const Tensor& labels, int64_t step,
               int64_t global_rows);
  void accumulate(const Tensor& images, const Tensor& labels, int64_t step, int64_t global_rows);
  void update();
  // Draws step `step`'s mixing for `images` and writes it to mix_params_ (one copy, in the
  // device's stream order, before the step's device work).
  void write_mix(int64_t step, const Tensor& images);
  // The micro-batch's loss: the label-smoothed cross-entropy against `labels`, or with mixing
  // (partner_labels defined) its mix with the cross-entropy against the partners' labels.
  Tensor cross_entropy_loss(const Tensor& logits, const Tensor& labels,
                            const Tensor& partner_labels);
  // Mixed precision with an arena weight cast: fills compute_params_ from the parameters and
  // makes the forward take its views (`guard`, left empty without the cast).
  void cast_parameters(std::optional<autograd::AutocastGuard>& guard);
  // A phase's edge: its profiler range (trace_range.h) and the phase hook.
  void phase(StepPhase p, PhaseEdge e);

  nn::Module& model_;
  optim::Optimizer& optimizer_;
  ExecutionContext context_;
  StepOptions options_;
  StepHooks hooks_;
  MicroBatchPlan plan_;
  OomRecovery recovery_;
  std::unique_ptr<BufferSnapshot> buffers_;  // batch-norm models: rolled back on a retry
  std::unique_ptr<optim::LossScaler> scaler_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<StepGraph> graph_;
  std::string graph_blocker_;  // what keeps every step of this model eager
  StepSums sums_;
  Tensor last_loss_;
  std::vector<std::string> recompute_;
  // Mixed precision with ops::arena_weight_cast: the arena in the compute dtype, converted at
  // the start of each step's forward, and each parameter's view of it by tensor id.
  Tensor compute_params_;
  autograd::CastCopies cast_copies_;
  // With mixing, on the device: f32 [8], ops::mix_batch's six parameters then the loss's two
  // weights (lam, 1 - lam); the parameters' view, the weights' views as scalars; and the host's
  // copy of the draw.
  Tensor mix_params_, mix_batch_params_, mix_own_, mix_partner_;
  MixDraw mix_;
};

}  // namespace hg::train
