// The classification trainer: a TrainStep (train_step.h) run over the training loader, a
// RunSession (run_session.h) around it, and an evaluation after each epoch. It leaves in the
// run directory the resolved config, metrics.jsonl (one line per epoch), the other metric files
// (run_session.h: per-step records, CSV, TensorBoard), checkpoints/ and final.safetensors.
//
// A run resumed from a checkpoint ends with bit-identical weights to an uninterrupted run on
// the same device and thread count: the checkpoint holds the model (parameters and buffers),
// the optimizer state and step count (the learning rate and dropout masks are functions of
// it), the loader position (order and augmentation are functions of seed, epoch and index) and
// the epoch's partial metric sums.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/obs/monitor.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/evaluate.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/run/run_history.h"
#include "hourglass/train/run/run_session.h"
#include "hourglass/train/step/data_parallel.h"
#include "hourglass/train/step/weight_average.h"
#include "hourglass/train/training_setup.h"

namespace hg::obs {
class ProgressBar;
}

namespace hg::train {

class RunProfiler;

struct TrainerOptions {
  std::string run_dir;
  bool progress = true;          // progress bar on stderr (plain lines when not a terminal)
  std::string resume;            // "", "auto" or a checkpoint path (SessionOptions::resume)
  int64_t stop_after_steps = 0;  // > 0: stop (checkpointed) after this many steps of this run
  // > 0: the device allocator refuses to hold more than this many bytes in use (--memory-limit:
  // share a GPU, or rehearse the out-of-memory recovery of a bigger run).
  size_t memory_limit = 0;
  BudgetFlags budget;  // --budget, --budget-usd, --price-per-hour, --ledger, ...
  // Data parallelism (data_parallel.h): this process's communicator (null: the process trains
  // alone; one of size 1 takes the data-parallel path all the same). Every rank runs a Trainer
  // with the same config and run directory; rank 0 writes the run's files.
  Communicator* communicator = nullptr;
};

class Trainer {
 public:
  // Validates the config (errors name the key), creates the run directory, takes its lock
  // and, when resuming, loads the checkpoint (errors name the file and the reason).
  Trainer(const Config& config, TrainerOptions options);
  ~Trainer();

  // Trains the remaining epochs; returns the metrics of every epoch of the run so far
  // (including those before a resume; on ranks other than 0, only this run's). When a stop is
  // requested (before the first step, after a step, or during any epoch's evaluation, the last
  // included) it returns early with stopped() true and without final.safetensors, after writing a
  // checkpoint (none before the first step: last_checkpoint() is then the one resumed from, or "").
  std::vector<EpochMetrics> run();

  bool stopped() const { return !stop_reason_.empty(); }
  // Whether this process writes the run's files (rank 0 of a data-parallel job).
  bool writes_run_files() const { return session_->writes(); }
  const std::string& stop_reason() const { return stop_reason_; }
  // Path of the checkpoint the run resumed from ("" for a new run) and of the newest written.
  const std::string& resumed_from() const { return session_->resumed_from(); }
  const std::string& last_checkpoint() const { return session_->last_checkpoint(); }
  int64_t global_step() const { return setup_.optimizer->step_count(); }
  double checkpoint_seconds_total() const { return session_->checkpoint_seconds_total(); }

  const RunConfig& run_config() const { return run_; }
  const std::string& run_dir() const { return session_->run_dir(); }
  nn::Module& model() { return *setup_.parts.model; }
  const FlatParameters& parameters() const { return setup_.flat; }
  // What the run trains with: datasets (the validation split included), loaders, step.
  const TrainingSetup& setup() const { return setup_; }
  TrainStep& step() { return *setup_.step; }

 private:
  struct EpochProgress;  // the epoch's device accumulators and counters

  void adopt(const LoadedCheckpoint& ckpt);
  // Trains `epoch` from the resume position or its start; false when stopped. Its parts:
  bool train_epoch(int64_t epoch, std::vector<EpochMetrics>& history);
  // The epoch's counters (a resumed epoch's from the checkpoint), its loader started.
  void begin_epoch(int64_t epoch, EpochProgress& p);
  // The loader's next batch; the wait for it counts as data wait.
  std::optional<data::Batch> next_batch(EpochProgress& p);
  // One step on `batch` and what follows it: the sums, the step's time, the first step's log
  // line, the profiler, the divergence check, the step window and the per-step record.
  void train_batch(const data::Batch& batch, EpochProgress& p);
  // The progress line, when due; never waits for the device.
  void show_progress(obs::ProgressBar& progress, EpochProgress& p);
  // A requested stop (checkpointed; false) or a checkpoint that is due.
  bool between_steps(obs::ProgressBar& progress, EpochProgress& p);
  // The epoch's metrics: totals over the ranks, the evaluation, the epoch-end checkpoint and
  // the metrics line.
  EpochMetrics end_epoch(EpochProgress& p);
  // The epoch's summary line and the unreadable images skipped so far.
  void report_epoch(const EpochMetrics& m, obs::ProgressBar& progress);
  // Writes a checkpoint at (epoch, next_batch); returns the stall in seconds.
  double write_checkpoint(const EpochProgress* p, int64_t epoch, int64_t next_batch);
  // A NaN or infinite `value` (`what`: the epoch's training loss summed over the ranks, or the
  // weights' sum): closes the session and throws ErrorKind::Diverged naming the last
  // checkpoint, which is left as it is.
  [[noreturn]] void diverged(int64_t epoch, double value, const char* what = "the training loss");
  // Every rank at the same step: diverged() when the epoch's running loss is not finite.
  // On a GPU the sum checked is the one read at the check before (no wait for the device).
  void check_loss_finite(EpochProgress& p);
  // The stop the session reports after a step, "" to go on.
  std::string poll_stop();
  // The progress line's run-wide part: "run eta 1:02:03, budget 41% used".
  std::string run_progress_text(int64_t epoch) const;
  // What every rank does after a step: stop (the reason; "" to go on) and/or write a
  // checkpoint. Alone: this process's own answers. Data-parallel: rank 0's decision, taken
  // from what every rank has seen, exchanged every few steps (`force`: now).
  struct Decision {
    std::string stop;
    bool checkpoint = false;
  };
  Decision decide(std::string stop, bool checkpoint, bool force);
  // Evaluates `loader` (this rank's shard of it), summed over the ranks.
  EvalResult evaluate_all(data::DataLoader& loader);
  // train.ema_batch_norm = "recompute", with the average in the model's place: its batch-norm
  // statistics recomputed on training batches of epoch `epoch` (0-based). Returns the seconds
  // it took (0 when the statistics are averaged instead).
  double recompute_ema_batch_norm(int64_t epoch);
  // The epoch-end evaluation: validation (when held out) and test into `m`, their time added
  // to `seconds`.
  void evaluate_epoch(EpochMetrics& m, double& seconds);
  // The per-step record after the current step (rank 0; metrics.every_steps), over the window
  // since the previous one. Reads the loss (and fp16's loss scale) from the device: waits for it.
  void write_step_record(int64_t epoch);

  RunConfig run_;
  TrainingSetup setup_;
  std::unique_ptr<DataParallel> dp_;  // null when training alone
  std::unique_ptr<RunSession> session_;

  TrainingState start_;                // where run() begins (a new run: all zero)
  std::vector<EpochMetrics> history_;  // epochs completed before run()
  double best_acc_ = -1;
  std::string last_epoch_record_;
  int64_t steps_this_run_ = 0;
  // The epoch the training loader was started on (from its first batch) ahead of its
  // train_epoch: before the start-up's warm-up, or right after the epoch before it trained, so
  // the loader builds its first batches during the warm-up, or that epoch's evaluation and
  // checkpoint; -1 for none.
  int64_t loader_started_for_ = -1;
  MovingAverage step_seconds_{20};
  double last_eval_seconds_ = 0;
  std::string stop_reason_;
  int64_t stopped_early_at_ = 0;  // epochs trained when early stopping ended the run (0: not)
  // The device monitor (monitor.csv; rank 0, monitor.every_seconds > 0) during run(), and the
  // step loop's totals it reads: seconds waiting for batches, seconds in the loop.
  std::unique_ptr<obs::Monitor> monitor_;
  // The op profiler over a window of steps (profile.enabled; rank 0) during run().
  std::unique_ptr<RunProfiler> profiler_;
  std::unique_ptr<WeightAverage> ema_;  // train.ema_decay > 0
  std::atomic<double> loop_wait_seconds_{0}, loop_seconds_{0};
  std::atomic<int64_t> monitor_step_{0};  // the global step, for its TensorBoard scalars
  // The step loop since the last per-step record: its time (evaluations excluded), the time it
  // waited for the loader and the samples this rank trained.
  struct StepWindow {
    double seconds = 0, data_wait_seconds = 0;
    int64_t samples = 0;
  };
  StepWindow step_window_;
  std::chrono::steady_clock::time_point steps_start_ = std::chrono::steady_clock::now();
  // Data parallelism: what this rank saw since the last exchange (decide()).
  std::string pending_stop_;
  bool pending_checkpoint_ = false;
};

}  // namespace hg::train
