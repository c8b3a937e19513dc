// The training loop: builds the datasets, model, parameter arena, optimizer and schedule from
// a RunConfig, trains for the configured epochs, evaluates after each, and leaves in the run
// directory the resolved config, metrics.jsonl (one line per epoch), checkpoints/ (resumable
// checkpoints, see checkpoint_dir.h) and final.safetensors.
//
// Checkpoints are written every checkpoint.every seconds and/or checkpoint.every_steps steps,
// at the end of every epoch, and when a stop is requested (stop_request.h, the step limit of
// TrainerOptions, or a file named STOP in the run directory). A run resumed from one ends with
// bit-identical weights to an uninterrupted run on the same device and thread count: the
// checkpoint holds the model (parameters and buffers), the optimizer state and step count (the
// learning rate and dropout masks are functions of it), the loader position (order and
// augmentation are functions of seed, epoch and index) and the epoch's partial metric sums.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/data/loader.h"
#include "hourglass/nn/module.h"
#include "hourglass/optim/mixed_precision.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/train/budget.h"
#include "hourglass/train/checkpoint.h"
#include "hourglass/train/checkpoint_dir.h"
#include "hourglass/train/run_config.h"
#include "hourglass/train/oom_policy.h"
#include "hourglass/train/run_history.h"

namespace hg::train {

// The datasets and model a run's config describes (shared by train and eval).
struct RunParts {
  std::shared_ptr<const data::ImageDataset> train_set, test_set;
  std::shared_ptr<nn::Module> model;
};
// Loads the datasets (the train set only when `with_train`) and builds the model, initialised
// from the run's seed, on the run's device.
RunParts build_run_parts(const RunConfig& run, bool with_train);
// A loader over `set` for evaluation (no shuffle, no augmentation).
// The training loader over `set`: shuffled, augmented as configured.
std::unique_ptr<data::DataLoader> make_train_loader(const RunConfig& run,
                                                    std::shared_ptr<const data::ImageDataset> set);
std::unique_ptr<data::DataLoader> make_eval_loader(const RunConfig& run,
                                                   std::shared_ptr<const data::ImageDataset> set);

struct TrainerOptions {
  std::string run_dir;
  bool progress = true;     // progress bar on stderr (plain lines when not a terminal)
  // "" starts a new run (an error when run_dir already holds checkpoints); "auto" continues
  // from the newest valid checkpoint in run_dir (skipping invalid ones with a warning; a new
  // run when there is none; an error when there are some but none is valid); anything else is
  // the path of a checkpoint to continue from (an error when it is not valid).
  std::string resume;
  int64_t stop_after_steps = 0;   // > 0: stop (checkpointed) after this many steps of this run
  // > 0: the device allocator refuses to hold more than this many bytes in use (--memory-limit:
  // share a GPU, or rehearse the out-of-memory recovery of a bigger run).
  size_t memory_limit = 0;
  BudgetFlags budget;             // --budget, --budget-usd, --price-per-hour, --ledger, ...
};

class Trainer {
 public:
  // Validates the config (errors name the key), creates the run directory, takes its lock
  // and, when resuming, loads the checkpoint (errors name the file and the reason).
  Trainer(const Config& config, TrainerOptions options);
  ~Trainer();

  // Trains the remaining epochs; returns the metrics of every epoch of the run so far
  // (including those before a resume). When a stop is requested it returns early, after
  // writing a checkpoint, with stopped() true and without final.safetensors.
  std::vector<EpochMetrics> run();

  bool stopped() const { return stopped_; }
  const std::string& stop_reason() const { return stop_reason_; }
  // Path of the checkpoint the run resumed from ("" for a new run) and of the newest written.
  const std::string& resumed_from() const { return resumed_from_; }
  const std::string& last_checkpoint() const { return last_checkpoint_; }
  int64_t global_step() const { return optimizer_->step_count(); }
  double checkpoint_seconds_total() const { return checkpoint_seconds_total_; }

  const RunConfig& run_config() const { return run_; }
  const std::string& run_dir() const { return options_.run_dir; }
  nn::Module& model() { return *parts_.model; }
  const FlatParameters& parameters() const { return flat_; }

 private:
  struct EpochProgress;   // the epoch's device accumulators and counters

  void resolve_resume();
  void adopt(const LoadedCheckpoint& ckpt);
  // Trains `epoch` from the resume position or its start; false when stopped.
  bool train_epoch(int64_t epoch, std::vector<EpochMetrics>& history);
  std::string poll_stop();
  // Writes a checkpoint at (epoch, next_batch); returns the stall in seconds.
  double write_checkpoint(const EpochProgress& p, int64_t epoch, int64_t next_batch,
                          bool epoch_end);

  Config config_;
  RunConfig run_;
  TrainerOptions options_;
  RunParts parts_;
  FlatParameters flat_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  autograd::AutocastPolicy autocast_;            // the precision's compute dtype
  std::unique_ptr<optim::LossScaler> scaler_;    // fp16 only
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<data::DataLoader> train_loader_, test_loader_;
  std::unique_ptr<CheckpointDir> checkpoints_;
  int64_t total_steps_ = 0;
  std::string trajectory_text_, trajectory_hash_;

  TrainingState start_;               // where run() begins (a new run: all zero)
  std::vector<EpochMetrics> history_; // epochs completed before run()
  std::string resumed_from_, last_checkpoint_;
  double best_test_acc_ = -1;
  std::string best_checkpoint_, last_epoch_record_;
  std::chrono::steady_clock::time_point last_checkpoint_time_;
  int64_t steps_this_run_ = 0;
  double checkpoint_seconds_total_ = 0;
  bool stopped_ = false;
  // Out-of-memory recovery: the micro-batch in use and how to undo a failed attempt.
  MicroBatchPlan micro_plan_{1};
  OomRecovery oom_recovery_;
  std::unique_ptr<BufferSnapshot> buffers_before_step_;   // batch-norm models only
  // The budget: every second of this process is charged to the ledger.
  std::unique_ptr<BudgetLedger> ledger_;
  MovingAverage step_seconds_{20};
  double last_eval_seconds_ = 0;
  double checkpoint_stall_max_ = 0;
  BudgetSettings budget_settings_;
  std::string stop_reason_;
};

}  // namespace hg::train
