#include "hourglass/train/run/run_session.h"

#include <cstring>

#include <unistd.h>

#include <filesystem>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/duration.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/obs/metric_sinks.h"
#include "hourglass/train/run/stop_request.h"

namespace hg::train {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

RunSession::RunSession(const Config& config, std::string run_name, std::string trajectory_text,
                       const CheckpointConfig& checkpoints, SessionOptions options)
    : config_(config),
      run_name_(std::move(run_name)),
      trajectory_text_(std::move(trajectory_text)),
      trajectory_hash_(config_hash(trajectory_text_)),
      policy_(checkpoints),
      options_(std::move(options)),
      last_checkpoint_time_(Clock::now()) {
  set_stop_phase(StopPhase::Starting);
  HG_CHECK(!options_.run_dir.empty(), "a run session needs a run directory");
  HG_CHECK(options_.stop_after_steps >= 0, "--stop-after must be non-negative, got {}",
           options_.stop_after_steps);
  HG_CHECK(options_.ranks >= 1 && options_.rank >= 0 && options_.rank < options_.ranks,
           "run session: rank {} of {} is not a rank", options_.rank, options_.ranks);
  budget_ = resolve_budget_settings(config_, options_.budget);
  if (!writes()) return;
  std::error_code ec;
  fs::create_directories(options_.run_dir, ec);
  if (ec)
    throw_runtime(fmt::format("cannot create run directory {}: {}", options_.run_dir, ec.message()),
                  "check the path and its permissions, or pass another --run-dir");
  checkpoints_ = std::make_unique<CheckpointDir>(options_.run_dir, policy_.keep_last);
}

RunSession::~RunSession() {
  // An error (or a stop) left a write in flight: it completes, or its failure is named.
  try {
    settle_checkpoint_logging_failure();
  } catch (...) {
  }
}

std::optional<LoadedCheckpoint> RunSession::find_resume_point(
    const std::function<void(const LoadedCheckpoint&)>& validate) {
  HG_ASSERT(writes(), "rank 0 chooses the resume point");
  const std::vector<CheckpointDir::Entry> existing = checkpoints_->list();
  const std::string& mode = options_.resume;
  if (mode.empty() || (mode == "auto" && existing.empty())) {
    if (!existing.empty())
      throw_invalid(fmt::format("run directory {} already holds {} checkpoint(s), the newest {}",
                                options_.run_dir, existing.size(), existing.back().name),
                    "continue that run with --resume auto, or pass a new --run-dir");
    if (mode == "auto") HG_LOG_INFO("no checkpoint in {}: starting the run", checkpoints_->dir());
    return std::nullopt;
  }
  auto try_load = [&](const std::string& path) {
    LoadedCheckpoint c = read_training_checkpoint(path);
    validate(c);
    return c;
  };
  if (mode != "auto") return try_load(mode);
  // Newest first; only loading and checking may fail over to an older checkpoint (adopting
  // one changes the folder, so its errors end the run). A file whose name's step is not the
  // step it holds is not the checkpoint its name says (renamed, or edited): adopting it would
  // go back to its step and move the valid newer checkpoints out of the rotation.
  std::string newest_reason;
  for (auto it = existing.rbegin(); it != existing.rend(); ++it) {
    const std::string path = checkpoints_->path(it->name);
    try {
      LoadedCheckpoint c = try_load(path);
      if (c.state.step != it->step)
        throw_invalid(fmt::format("{} is named for step {} but holds step {}", it->name, it->step,
                                  c.state.step));
      return c;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::InvalidInput && e.kind() != ErrorKind::Runtime) throw;
      HG_LOG_WARN("skipping checkpoint {}: {}", path, e.message());
      if (newest_reason.empty()) newest_reason = e.message();
    }
  }
  throw_invalid(
      fmt::format("none of the {} checkpoint(s) in {} can continue this run; the newest: {}",
                  existing.size(), checkpoints_->dir(), newest_reason),
      "fix the cause (for a changed config, resume with the one the run started with), "
      "or pass a new --run-dir to start over");
}

std::vector<EpochMetrics> RunSession::adopt(const LoadedCheckpoint& ckpt) {
  const TrainingState& s = ckpt.state;
  if (!writes()) {
    resumed_from_ = last_checkpoint_ = ckpt.file.path;
    return {};
  }
  // The best checkpoint is named relative to this run's folder; one resumed from elsewhere
  // has its best file there.
  best_checkpoint_ = !s.best_checkpoint.empty() && fs::exists(checkpoints_->path(s.best_checkpoint))
                         ? s.best_checkpoint
                         : "";
  resumed_from_ = last_checkpoint_ = ckpt.file.path;
  for (const std::string& name : checkpoints_->discard_after(s.step))
    HG_LOG_WARN("moved {} (newer than the checkpoint resumed from) to {}/discarded", name,
                checkpoints_->dir());
  const std::string name = CheckpointDir::file_name(s.step);
  std::error_code ec;
  if (fs::equivalent(checkpoints_->path(name), ckpt.file.path, ec))
    checkpoints_->commit(name, best_checkpoint_);
  if (s.threads != num_threads())
    HG_LOG_WARN(
        "checkpoint {} was written with {} compute threads, this run has {}: it continues "
        "correctly but not bit-identically to an uninterrupted run",
        ckpt.file.path, s.threads, num_threads());
  HG_LOG_INFO("resuming from {}: epoch {}, batch {} (step {})", ckpt.file.path, s.epoch + 1,
              s.batch, s.step);
  std::vector<EpochMetrics> history =
      reconcile_metrics_file(metrics_path(), s.epoch, s.last_epoch_record);
  if (options_.metrics.csv) {
    std::vector<std::vector<std::pair<std::string, double>>> records;
    for (const EpochMetrics& m : history) records.push_back(epoch_record(m));
    obs::MetricsCsv::write_file(options_.run_dir + "/metrics.csv", records);
  }
  obs::MetricsJsonl::drop_lines_after(options_.run_dir + "/steps.jsonl", "step", double(s.step));
  obs::MetricsCsv::drop_rows_after(options_.run_dir + "/steps.csv", double(s.step));
  open_metric_sinks(s.step);
  return history;
}

void RunSession::start_new() {
  if (!writes()) return;
  reconcile_metrics_file(metrics_path(), 0, "");
  // What a run without checkpoints left here is history of nothing, like its metrics.jsonl.
  std::error_code ec;
  for (const char* name : {"metrics.csv", "steps.jsonl", "steps.csv"})
    fs::remove(options_.run_dir + "/" + name, ec);
  for (const auto& e : fs::directory_iterator(tensorboard_dir(), ec))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) fs::remove(e.path(), ec);
  open_metric_sinks(-1);
}

void RunSession::open_metric_sinks(int64_t resumed_step) {
  const MetricsConfig& m = options_.metrics;
  const std::string& dir = options_.run_dir;
  step_sinks_ = std::make_unique<obs::MetricSinks>();
  epoch_sinks_ = std::make_unique<obs::MetricSinks>();
  monitor_sinks_ = std::make_unique<obs::MetricSinks>();
  if (m.csv) epoch_sinks_->add(std::make_unique<obs::CsvSink>(dir + "/metrics.csv"));
  if (m.every_steps > 0) {
    step_sinks_->add(std::make_unique<obs::JsonlSink>(dir + "/steps.jsonl"));
    if (m.csv) step_sinks_->add(std::make_unique<obs::CsvSink>(dir + "/steps.csv"));
  }
  if (m.tensorboard) {
    auto writer = std::make_shared<obs::TensorBoardWriter>(tensorboard_dir());
    // The steps after the checkpoint are trained again: TensorBoard drops what it read of them.
    if (resumed_step >= 0) writer->session_start(resumed_step + 1);
    epoch_sinks_->add(std::make_unique<obs::TensorBoardSink>(writer, "epoch/"));
    monitor_sinks_->add(std::make_unique<obs::TensorBoardSink>(writer, "monitor/"));
    if (m.every_steps > 0)
      step_sinks_->add(std::make_unique<obs::TensorBoardSink>(
          writer, "step/", std::set<std::string>{"step", "time"}));
  }
}

void RunSession::open_ledger() {
  last_checkpoint_time_ = Clock::now();
  if (!writes()) return;
  budget_.limits.devices = options_.ranks;
  ledger_ = std::make_unique<BudgetLedger>(
      budget_.ledger_path.empty() ? options_.run_dir + "/budget.json" : budget_.ledger_path,
      budget_.limits, run_name_, budget_.phase, LedgerOptions{budget_.flush_every_seconds});
  if (budget_.limits.has_limit() || ledger_->limits().has_limit())
    HG_LOG_INFO("budget: {}", ledger_->summary());
  if (ledger_->must_stop(0, 0)) {
    // Nothing spent yet: the budget itself is no more than the reserve.
    if (ledger_->spent_device_seconds() <= 0)
      throw_invalid(
          fmt::format("the budget ({} left on {} device(s)) is no more than the time kept back "
                      "for the final checkpoint and evaluation ({})",
                      format_duration_clock(ledger_->remaining_wall_seconds()),
                      ledger_->limits().devices,
                      format_duration_clock(ledger_->limits().reserve_seconds)),
          "raise --budget / --budget-usd above the reserve, or lower --budget-reserve");
    throw_invalid(fmt::format("the budget is spent: {}", ledger_->summary()),
                  "raise --budget / --budget-usd, or record this phase in a new --ledger");
  }
  write_file_atomic(options_.run_dir + "/config.toml", config_.to_toml());
  last_checkpoint_time_ = Clock::now();
}

std::string RunSession::poll_stop(int64_t steps_this_run, double step_seconds,
                                  double final_seconds) {
  if (!writes()) return stop_requested() ? consume_stop_request() : std::string();
  HG_ASSERT(ledger_ != nullptr, "poll_stop before open_ledger");
  try {
    ledger_->charge_elapsed();
  } catch (const Error& e) {
    // The ledger's periodic write re-reads the shared file: one replaced by garbage or that
    // can no longer be written stops the run (checkpointed by the caller), never resets it.
    if (e.kind() == ErrorKind::Internal) throw;
    HG_LOG_ERROR("{}; {}; then continue the run with --resume auto", e.message(), e.remedy());
    const bool names_it = e.message().find(ledger_->path()) != std::string::npos;
    return names_it ? e.message()
                    : fmt::format("budget ledger {}: {}", ledger_->path(), e.message());
  }
  if (ledger_->should_warn()) HG_LOG_WARN("budget: {}", ledger_->summary());
  if (ledger_->must_stop(step_seconds, final_seconds)) return "the budget";
  if (stop_requested()) {
    std::string reason = consume_stop_request();
    if (!reason.empty()) return reason;
  }
  if (options_.stop_after_steps > 0 && steps_this_run >= options_.stop_after_steps)
    return fmt::format("--stop-after {}", options_.stop_after_steps);
  const std::string stop_file = options_.run_dir + "/STOP";
  if (::access(stop_file.c_str(), F_OK) == 0) {
    std::error_code ec;
    fs::remove(stop_file, ec);  // consumed, so that resuming continues
    return "the STOP file";
  }
  return "";
}

bool RunSession::checkpoint_due(int64_t step) const {
  return (policy_.every_steps > 0 && step % policy_.every_steps == 0) ||
         (policy_.every_seconds > 0 &&
          seconds_since(last_checkpoint_time_) >= policy_.every_seconds);
}

void RunSession::settle_checkpoint() const {
  if (!pending_) return;
  PendingCheckpoint p = std::move(*pending_);
  pending_.reset();
  auto failed = [&](ErrorKind kind, const std::string& message) {
    write_error_ = Error(
        kind,
        fmt::format("{}; {}", message,
                    last_checkpoint_.empty()
                        ? "the run has no earlier checkpoint"
                        : fmt::format("the previous checkpoint {} is intact", last_checkpoint_)),
        "free disk space (or fix the cause above), then continue the run with --resume auto");
  };
  double write_seconds = 0;
  try {
    write_seconds = p.done.get();
  } catch (const Error& e) {
    failed(e.kind(), e.message());
    return;
  } catch (const std::exception& e) {
    failed(ErrorKind::Runtime, fmt::format("checkpoint {}: {}", p.path, e.what()));
    return;
  }
  last_checkpoint_ = p.path;
  checkpoint_seconds_max_ = std::max(checkpoint_seconds_max_, p.stall + write_seconds);
  std::error_code ec;
  const double mb = double(fs::file_size(p.path, ec)) / 1e6;
  // Mid-epoch checkpoints would break a progress bar redrawn in place; log them at debug there.
  const bool debug = p.quiet && options_.progress && ::isatty(STDERR_FILENO);
  spdlog::log(debug ? spdlog::level::debug : spdlog::level::info,
              "checkpoint {} ({:.1f} MB): the step loop waited {:.3f} s", p.path, mb, p.stall);
}

void RunSession::settle_checkpoint_logging_failure() {
  settle_checkpoint();
  if (!write_error_) return;
  HG_LOG_ERROR("{}", write_error_->one_line());
  write_error_.reset();
}

void RunSession::require_checkpoint_written() {
  settle_checkpoint();
  if (!write_error_) return;
  Error e = std::move(*write_error_);
  write_error_.reset();
  throw e;
}

void RunSession::prepare_checkpoint_memory(const nn::Module& model,
                                           const optim::Optimizer& optimizer) {
  if (!writes() || checkpoint_memory_.valid()) return;
  std::vector<std::pair<Shape, DType>> layout;
  for (const auto& [name, t] : model.state_dict()) layout.emplace_back(t.shape(), t.dtype());
  for (const auto& [name, t] : optimizer.state()) layout.emplace_back(t.shape(), t.dtype());
  checkpoint_memory_ = std::async(std::launch::async, [layout = std::move(layout)] {
    // All held at once (each its own block), then handed back to the cache together.
    std::vector<Tensor> blocks;
    for (const auto& [shape, dtype] : layout) {
      blocks.push_back(Tensor::empty(shape, dtype, Device::cpu()));
      std::memset(blocks.back().data_ptr(), 0, blocks.back().nbytes());
    }
  });
}

double RunSession::write_checkpoint(TrainingState state, const nn::Module& model,
                                    const optim::Optimizer& optimizer, bool quiet) {
  const auto t0 = Clock::now();
  if (checkpoint_memory_.valid()) checkpoint_memory_.get();
  require_checkpoint_written();
  if (!writes()) {  // rank 0 writes it
    last_checkpoint_ = options_.run_dir + "/checkpoints/" + CheckpointDir::file_name(state.step);
    last_checkpoint_time_ = Clock::now();
    return 0;
  }
  state.best_checkpoint = best_checkpoint_;
  state.threads = num_threads();
  state.config_text = trajectory_text_;
  state.config_hash = trajectory_hash_;
  const std::string name = CheckpointDir::file_name(state.step);
  const std::string path = checkpoints_->path(name);
  // Host copies of the tensors as they stand after this step; the rest off the step loop.
  auto image = std::make_shared<const CheckpointImage>(
      training_checkpoint_image(model, optimizer, config_, state));
  PendingCheckpoint p;
  p.path = path;
  p.quiet = quiet;
  p.done = std::async(std::launch::async,
                      [image, path, name, best = best_checkpoint_, dir = checkpoints_.get()] {
                        const auto start = Clock::now();
                        save_checkpoint_image(path, *image);
                        dir->commit(name, best);
                        return seconds_since(start);
                      });
  last_checkpoint_time_ = Clock::now();
  p.stall = seconds_since(t0);
  checkpoint_seconds_total_ += p.stall;
  const double stall = p.stall;
  pending_ = std::move(p);
  return stall;
}

void RunSession::append_metrics(const std::vector<std::pair<std::string, double>>& record,
                                int64_t step) {
  if (!writes()) return;
  obs::MetricsJsonl(metrics_path()).write(record);
  if (epoch_sinks_) epoch_sinks_->write(step, record);
}

void RunSession::append_step_metrics(int64_t step,
                                     const std::vector<std::pair<std::string, double>>& record) {
  if (!writes() || !step_sinks_ || step_sinks_->empty()) return;
  std::vector<std::pair<std::string, double>> values{{"step", double(step)}};
  values.insert(values.end(), record.begin(), record.end());
  if (ledger_) {
    values.emplace_back("budget_device_hours", ledger_->spent_device_seconds() / 3600.0);
    if (ledger_->limits().price_per_hour > 0)
      values.emplace_back("budget_usd", ledger_->spent_usd());
  }
  step_sinks_->write(step, values);
}

void RunSession::append_monitor_record(int64_t step,
                                       const std::vector<std::pair<std::string, double>>& values) {
  // The sinks are set before the monitor starts and outlive it (the trainer stops it first).
  if (writes() && monitor_sinks_ && !monitor_sinks_->empty()) monitor_sinks_->write(step, values);
}

void RunSession::save_final(const nn::Module& model, const optim::Optimizer& optimizer,
                            std::map<std::string, std::string> metadata,
                            const std::string& file_name) {
  require_checkpoint_written();
  if (!writes()) return;
  metadata.emplace(kConfigMetadataKey, config_.to_toml());
  // The weights only: the optimizer's state stays in the checkpoints (a final model is
  // evaluated, exported or fine-tuned, not resumed); its name and step count are recorded.
  metadata.emplace("hourglass.optim.name", optimizer.name());
  metadata.emplace("hourglass.optim.step", std::to_string(optimizer.step_count()));
  save_checkpoint(options_.run_dir + "/" + file_name, model, nullptr, std::move(metadata));
}

std::string RunSession::start_steps() {
  set_stop_phase(StopPhase::Training);
  return consume_stop_request();
}

std::string RunSession::start_finishing() {
  set_stop_phase(StopPhase::Finishing);
  std::string reason = consume_stop_request();
  if (!reason.empty()) set_stop_phase(StopPhase::Training);  // the run stops after all
  return reason;
}

void RunSession::finish(const std::string& stop_reason) {
  // The last checkpoint is on disk before the run ends. A failed write is thrown once the
  // session's end is recorded: a stop whose checkpoint is missing is not "stopped, resumable"
  // at that step (the previous checkpoint is what a resume continues, as the error says).
  settle_checkpoint();
  std::optional<Error> write_error = std::move(write_error_);
  write_error_.reset();
  close_ledger(stop_reason);
  if (write_error) throw *write_error;
}

void RunSession::close_ledger(const std::string& stop_reason) {
  if (!ledger_) return;
  if (!stop_reason.empty()) ledger_->set_stop_reason(stop_reason);
  try {
    ledger_->close();
  } catch (const Error& e) {
    // The run's own outputs are written; what is lost is this session's last accounting, so
    // it is reported with what a person needs to add it back.
    if (e.kind() == ErrorKind::Internal) throw;
    const LedgerSession& s = ledger_->session();
    HG_LOG_ERROR(
        "budget ledger {}: the final state of session {} (run {}, {:.1f} wall s, {:.1f} "
        "device-seconds) could not be recorded: {}; {}",
        ledger_->path(), s.id, s.run, s.wall_seconds, s.device_seconds, e.message(), e.remedy());
    return;
  }
  if (ledger_->limits().has_limit()) HG_LOG_INFO("budget: {}", ledger_->summary());
}

}  // namespace hg::train
