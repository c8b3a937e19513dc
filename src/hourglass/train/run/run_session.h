// What a run needs around its training steps, whatever it trains: the run directory and its
// lock, the resolution of --resume, stop requests (signals, --stop-after, a STOP file, the
// budget), the budget ledger, checkpoint writing and rotation, the metrics files and the final
// weights. The classification Trainer is a TrainStep and a RunSession plus evaluation; another
// kind of trainer reuses the session as it is.
//
//   RunSession session(config, name, trajectory_text, checkpoint_policy, options);
//   if (auto ckpt = session.find_resume_point(validate)) { restore(*ckpt); session.adopt(*ckpt); }
//   else session.start_new();
//   session.open_ledger();
//   session.start_steps() (a stop requested during setup)
//   ... each step: session.poll_stop(...), session.checkpoint_due(step) -> write_checkpoint
//   session.start_finishing() (a stop requested during the last evaluation), save_final
//   session.finish(stop_reason);
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/base/error.h"
#include "hourglass/nn/module.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/run/checkpoint_dir.h"
#include "hourglass/train/run/run_history.h"

namespace hg::obs {
class MetricSinks;
}

namespace hg::train {

// The metric files of a run directory (rank 0 writes them):
//   metrics.jsonl   one line per epoch (run_history.h: epoch_record), always
//   metrics.csv     the same records as CSV (metrics.csv = true)
//   steps.jsonl     a record every metrics.every_steps optimizer steps (when not 0)
//   steps.csv       the same records as CSV (metrics.csv = true)
//   tensorboard/    an event file per session (metrics.tensorboard = true): the step records as
//                   scalars "step/<name>" (but step and time, which the event holds), the epoch
//                   records as "epoch/<name>", at their optimizer step, and the device monitor's
//                   samples (obs/monitor.h) as "monitor/<name>" at the step of their time
// A resumed run rewrites metrics.csv to the epochs metrics.jsonl keeps, drops the step records
// after the checkpoint's step (they are trained again) and starts its event file with a
// SessionLog START at the next step, which makes TensorBoard drop those steps' events. A new run
// in a directory without checkpoints empties them all.
struct SessionOptions {
  std::string run_dir;
  bool progress = true;  // a progress bar on stderr (mid-epoch checkpoint lines go to debug)
  // "" starts a new run (an error when run_dir already holds checkpoints); "auto" continues
  // from the newest valid checkpoint in run_dir (skipping invalid ones with a warning; a new
  // run when there is none; an error when there are some but none is valid); anything else is
  // the path of a checkpoint to continue from (an error when it is not valid).
  std::string resume;
  int64_t stop_after_steps = 0;  // > 0: stop (checkpointed) after this many steps of this run
  BudgetFlags budget;            // --budget, --budget-usd, --price-per-hour, --ledger, ...
  // Data parallelism: this process is rank `rank` of `ranks`. Rank 0 owns the run directory
  // (lock, checkpoints, metrics, ledger, final weights) and charges the ledger for `ranks`
  // devices; the session of another rank writes nothing: it reads the checkpoint rank 0
  // chose (the caller loads it) and reports only the signals and requests this process got.
  int rank = 0;
  int ranks = 1;
  // The per-step records and the formats beside metrics.jsonl (MetricsConfig, run_config.h).
  MetricsConfig metrics;
};

class RunSession {
 public:
  // Resolves the budget settings (errors name the flag or key), creates the run directory,
  // takes its lock and removes temporary files of interrupted writes.
  RunSession(const Config& config, std::string run_name, std::string trajectory_text,
             const CheckpointConfig& checkpoints, SessionOptions options);
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  // The checkpoint the run continues from, per SessionOptions::resume, or nothing for a new
  // run. `validate` throws (InvalidInput or Runtime, naming the fault) when a loaded checkpoint
  // cannot continue this run; "auto" then falls back to the next older one with a warning.
  std::optional<LoadedCheckpoint> find_resume_point(
      const std::function<void(const LoadedCheckpoint&)>& validate);
  // After the caller restored `ckpt`: moves newer checkpoints to discarded/, marks it last,
  // and makes metrics.jsonl hold exactly the epochs it covers. Returns their metrics.
  std::vector<EpochMetrics> adopt(const LoadedCheckpoint& ckpt);
  // A new run: metrics.jsonl starts empty (a stale one is reconciled to nothing).
  void start_new();
  // Opens the budget ledger (after the resume point is settled, so a refused resume charges
  // nothing) and writes config.toml. Throws InvalidInput when the budget is already spent.
  void open_ledger();

  // Before the first step (StopPhase::Training from now on): returns the signal or
  // request_stop() that arrived while the run was set up ("" to go on). The caller then stops
  // without a checkpoint: nothing is trained yet.
  std::string start_steps();
  // Between steps: charges the ledger, then returns why the run must stop ("" to go on): the
  // ledger cannot be updated (a corrupted or unwritable file, named with its fault; logged with
  // the remedy), the budget (one more step of `step_seconds` plus `final_seconds` of final work
  // would overrun it), a signal or request_stop(), --stop-after (after `steps_this_run`
  // steps), or a STOP file in the run directory (removed, so that resuming continues).
  std::string poll_stop(int64_t steps_this_run, double step_seconds, double final_seconds);
  // After the last step and evaluation, before the final weights (StopPhase::Finishing from
  // now on: later requests are not honoured): returns a signal or request_stop() that arrived
  // before, "" to go on. The caller then stops instead of finishing; its last checkpoint must
  // already cover the whole run.
  std::string start_finishing();
  // Whether an interval checkpoint is due after optimizer step `step` (every_steps, or
  // every_seconds since the last checkpoint).
  bool checkpoint_due(int64_t step) const;

  // Writes checkpoints/step-<state.step>.safetensors (state's config text and hash, seed and
  // threads are filled in here), points `last` at it and rotates. The caller waits only for
  // host copies of the tensors (the checkpoint's image); the file is written, checksummed,
  // synced and committed on a thread of its own while training goes on, and the next
  // write_checkpoint, last_checkpoint(), save_final, finish() and the destructor wait for it.
  // Returns the seconds the caller waited (for the image, and for the previous write if it
  // had not finished). A failed write throws from the next write_checkpoint or save_final,
  // naming the previous intact checkpoint, or from finish(). The line naming a
  // written checkpoint is logged when it is committed, from the caller's thread (mid-epoch
  // writes at debug level under a progress bar: `quiet`).
  double write_checkpoint(TrainingState state, const nn::Module& model,
                          const optim::Optimizer& optimizer, bool quiet);
  // Makes the host memory of the checkpoints' images ready on a thread of its own (allocated
  // and touched, then left in the host allocator's cache, which the first image's copies then
  // take): without it the first checkpoint pays the page faults of fresh memory inside the
  // first epoch (0.03 s of the 0.04 s an H200 ResNet-18 run's first checkpoint waited). The
  // first write_checkpoint waits for it. Nothing on ranks other than 0.
  void prepare_checkpoint_memory(const nn::Module& model, const optim::Optimizer& optimizer);
  // The checkpoint `best` marks from now on (a file name in checkpoints/, written at the next
  // write_checkpoint).
  void set_best_checkpoint(const std::string& name) { best_checkpoint_ = name; }
  const std::string& best_checkpoint() const { return best_checkpoint_; }
  // One line of metrics.jsonl, and the record in metrics.csv and TensorBoard ("epoch/<name>" at
  // optimizer step `step`).
  void append_metrics(const std::vector<std::pair<std::string, double>>& record, int64_t step = 0);
  // One per-step record (steps.jsonl, steps.csv, TensorBoard's "step/<name>") of optimizer step
  // `step`: "step" first, then `record`, then the budget spent (budget_device_hours, and
  // budget_usd with a price per hour) from the ledger. Nothing on ranks other than 0.
  void append_step_metrics(int64_t step, const std::vector<std::pair<std::string, double>>& record);
  // One device monitor sample as TensorBoard's "monitor/<name>" at optimizer step `step`
  // (metrics.tensorboard); safe to call from the monitor's thread.
  void append_monitor_record(int64_t step,
                             const std::vector<std::pair<std::string, double>>& values);
  // final.safetensors (or `file_name` in the run directory: final_ema.safetensors): the model's
  // weights and buffers (not the optimizer's state, which the checkpoints keep) with `metadata`,
  // the config, and the optimizer's name and step count.
  void save_final(const nn::Module& model, const optim::Optimizer& optimizer,
                  std::map<std::string, std::string> metadata,
                  const std::string& file_name = "final.safetensors");
  // Waits for the last checkpoint and closes the ledger, recording `stop_reason` ("" for a
  // finished run). A ledger that cannot be written then is logged as an error naming it and the
  // unrecorded time, not thrown: the run's outputs are complete. A failed last checkpoint is
  // thrown after the ledger is closed (it names the previous intact one).
  void finish(const std::string& stop_reason);

  // Whether this session writes the run's files (rank 0).
  bool writes() const { return options_.rank == 0; }
  const std::string& run_dir() const { return options_.run_dir; }
  const std::string& run_name() const { return run_name_; }
  const SessionOptions& options() const { return options_; }
  const Config& config() const { return config_; }
  const std::string& resumed_from() const { return resumed_from_; }
  // The newest committed checkpoint (waits for one being written).
  const std::string& last_checkpoint() const {
    settle_checkpoint();
    return last_checkpoint_;
  }
  double checkpoint_seconds_total() const { return checkpoint_seconds_total_; }
  // The longest a checkpoint took to be on disk (the step loop's wait and the write after it):
  // what the budget keeps back for the final one.
  double checkpoint_seconds_max() const { return checkpoint_seconds_max_; }
  std::string metrics_path() const { return options_.run_dir + "/metrics.jsonl"; }
  std::string tensorboard_dir() const { return options_.run_dir + "/tensorboard"; }
  BudgetLedger& ledger() { return *ledger_; }

 private:
  Config config_;
  std::string run_name_;
  std::string trajectory_text_, trajectory_hash_;
  CheckpointConfig policy_;
  SessionOptions options_;
  BudgetSettings budget_;
  std::unique_ptr<CheckpointDir> checkpoints_;
  std::unique_ptr<BudgetLedger> ledger_;
  std::string resumed_from_, best_checkpoint_;
  // The checkpoint being written on its own thread, and what to log and record once it is.
  struct PendingCheckpoint {
    std::future<double> done;  // the write's seconds
    std::string path;
    double stall = 0;
    bool quiet = false;
  };
  // Waits for the pending write: commits its bookkeeping (last_checkpoint_, the log line), or
  // keeps its error in write_error_ for the next write_checkpoint / save_final / finish.
  void settle_checkpoint() const;
  // settle_checkpoint(), then throws a kept write error ...
  void require_checkpoint_written();
  // ... or logs it (the run's end, the destructor).
  void settle_checkpoint_logging_failure();
  // finish()'s ledger part.
  void close_ledger(const std::string& stop_reason);
  mutable std::optional<PendingCheckpoint> pending_;
  std::future<void> checkpoint_memory_;  // prepare_checkpoint_memory's thread
  mutable std::optional<Error> write_error_;
  mutable std::string last_checkpoint_;
  std::chrono::steady_clock::time_point last_checkpoint_time_;
  double checkpoint_seconds_total_ = 0;
  mutable double checkpoint_seconds_max_ = 0;
  // Opened once the resume point is settled (adopt, start_new); rank 0 only.
  std::unique_ptr<obs::MetricSinks> step_sinks_, epoch_sinks_, monitor_sinks_;
  void open_metric_sinks(int64_t resumed_step);
};

}  // namespace hg::train
