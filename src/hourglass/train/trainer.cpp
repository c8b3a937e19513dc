#include "hourglass/train/trainer.h"

#include <cstdio>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>

#include "hourglass/autograd/functions.h"
#include "hourglass/base/atomic_file.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/nn/layers.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/obs/metrics_jsonl.h"
#include "hourglass/obs/progress.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/clip.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/evaluate.h"
#include "hourglass/train/stop_request.h"

namespace hg::train {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

RunParts build_run_parts(const RunConfig& run, bool with_train) {
  RunParts parts;
  data::DatasetOptions test_opts = run.data.synthetic;
  test_opts.limit = run.data.test_limit;
  parts.test_set = std::make_shared<const data::ImageDataset>(
      data::load_dataset(run.data.dataset, run.data.path, data::Split::Test, test_opts));
  if (with_train) {
    data::DatasetOptions train_opts = run.data.synthetic;
    train_opts.limit = run.data.train_limit;
    parts.train_set = std::make_shared<const data::ImageDataset>(
        data::load_dataset(run.data.dataset, run.data.path, data::Split::Train, train_opts));
  }
  const data::ImageDataset& shape_source = *parts.test_set;
  nn::ModelSpec spec = run.model;
  spec.in_channels = shape_source.channels;
  spec.height = shape_source.height;
  spec.width = shape_source.width;
  spec.num_classes = shape_source.num_classes;
  parts.model = nn::make_model(spec);
  nn::initialize(*parts.model, run.seed);
  parts.model->to(run.device);
  return parts;
}

namespace {
data::LoaderOptions loader_options(const RunConfig& run, int64_t batch_size, bool training) {
  data::LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = training;
  o.augment = training && run.data.augment;
  o.drop_last = false;
  o.seed = run.seed;
  o.transform = run.data.transform;
  o.workers = run.data.workers;
  return o;
}
}  // namespace

std::unique_ptr<data::DataLoader> make_train_loader(const RunConfig& run,
                                                    std::shared_ptr<const data::ImageDataset> set) {
  return std::make_unique<data::DataLoader>(std::move(set),
                                            loader_options(run, run.train.batch_size, true));
}

std::unique_ptr<data::DataLoader> make_eval_loader(const RunConfig& run,
                                                   std::shared_ptr<const data::ImageDataset> set) {
  return std::make_unique<data::DataLoader>(std::move(set),
                                            loader_options(run, run.train.eval_batch_size, false));
}

// The epoch's running totals. Loss and correct count stay on the device during the epoch (no
// step waits for the host); a checkpoint reads them.
struct Trainer::EpochProgress {
  Tensor loss_sum, correct;
  int64_t samples = 0;
  double train_seconds_before = 0;   // spent in this epoch before a resume
  Clock::time_point segment_start = Clock::now();
  double checkpoint_seconds = 0;
  double train_seconds() const { return train_seconds_before + seconds_since(segment_start); }
};

Trainer::Trainer(const Config& config, TrainerOptions options)
    : config_(config), run_(parse_run_config(config_)), options_(std::move(options)) {
  HG_CHECK(!options_.run_dir.empty(), "the trainer needs a run directory");
  HG_CHECK(options_.stop_after_steps >= 0, "--stop-after must be non-negative, got {}",
           options_.stop_after_steps);
  if (run_.threads > 0) set_num_threads(run_.threads);
  if (options_.memory_limit > 0) {
    allocator_for(run_.device).set_limit(options_.memory_limit);
    HG_LOG_INFO("{} memory limited to {:.2f} GiB (--memory-limit)", run_.device.str(),
                double(options_.memory_limit) / double(size_t(1) << 30));
  }
  parts_ = build_run_parts(run_, true);
  flat_ = nn::build_parameter_arena(*parts_.model, run_.optim.decay_scope);
  if (run_.optim.name == "sgd")
    optimizer_ = std::make_unique<optim::Sgd>(flat_, run_.optim.sgd);
  else
    optimizer_ = std::make_unique<optim::AdamW>(flat_, run_.optim.adamw);
  autocast_ = optim::apply_precision(run_.precision, run_.device);
  ops::set_deterministic(run_.deterministic);
  if (run_.precision == optim::Precision::FP16) {
    scaler_ = std::make_unique<optim::LossScaler>(run_.device);
    optimizer_->set_skip_flag(scaler_->found_inf());
  }

  train_loader_ = make_train_loader(run_, parts_.train_set);
  test_loader_ = make_eval_loader(run_, parts_.test_set);

  const int64_t steps_per_epoch = train_loader_->batches_per_epoch();
  total_steps_ = steps_per_epoch * run_.train.epochs;
  schedule_ = make_run_schedule(run_, steps_per_epoch, total_steps_);
  trajectory_text_ = trajectory_config_text(run_);
  trajectory_hash_ = config_hash(trajectory_text_);

  oom_recovery_.allocator = &allocator_for(run_.device);
  oom_recovery_.zero_grad = [this] { optimizer_->zero_grad(); };
  oom_recovery_.batch_norm = has_batch_norm(*parts_.model);
  if (oom_recovery_.batch_norm) {
    // A retried step must not apply the failed attempt's running-statistics updates.
    buffers_before_step_ = std::make_unique<BufferSnapshot>(*parts_.model);
    oom_recovery_.rollback = [this] { buffers_before_step_->restore(); };
  }
  int64_t micro = run_.train.micro_batch;
  if (micro == kAutoMicroBatch) {
    const data::ImageDataset& set = *parts_.train_set;
    micro = find_max_micro_batch(
        make_training_probe(*parts_.model, flat_, {set.height, set.width, set.channels},
                            run_.train.batch_size, run_.device),
        run_.train.batch_size, *oom_recovery_.allocator);
    HG_LOG_INFO("train.micro_batch = \"auto\": {} rows per micro-batch fit", micro);
  }
  micro_plan_ = MicroBatchPlan(micro);
  budget_settings_ = resolve_budget_settings(config_, options_.budget);

  for (const auto& key : config_.unused_keys())
    HG_LOG_WARN("{}: key '{}' is not used by hourglass (misspelled?)", config_.source(), key);

  std::error_code ec;
  fs::create_directories(options_.run_dir, ec);
  if (ec)
    throw_runtime(fmt::format("cannot create run directory {}: {}", options_.run_dir, ec.message()),
                  "check the path and its permissions, or pass another --run-dir");
  checkpoints_ = std::make_unique<CheckpointDir>(options_.run_dir, run_.checkpoint.keep_last);
  resolve_resume();
  budget_settings_.limits.devices = 1;
  ledger_ = std::make_unique<BudgetLedger>(
      budget_settings_.ledger_path.empty() ? options_.run_dir + "/budget.json"
                                           : budget_settings_.ledger_path,
      budget_settings_.limits, run_.name, budget_settings_.phase);
  if (budget_settings_.limits.has_limit() || ledger_->limits().has_limit())
    HG_LOG_INFO("budget: {}", ledger_->summary());
  write_file_atomic(options_.run_dir + "/config.toml", config_.to_toml());
}

Trainer::~Trainer() = default;

void Trainer::resolve_resume() {
  const std::string metrics_path = options_.run_dir + "/metrics.jsonl";
  const std::vector<CheckpointDir::Entry> existing = checkpoints_->list();
  const std::string& mode = options_.resume;
  if (mode.empty() || (mode == "auto" && existing.empty())) {
    if (!existing.empty())
      throw_invalid(fmt::format("run directory {} already holds {} checkpoint(s), the newest {}",
                                options_.run_dir, existing.size(), existing.back().name),
                    "continue that run with --resume auto, or pass a new --run-dir");
    if (mode == "auto") HG_LOG_INFO("no checkpoint in {}: starting the run", checkpoints_->dir());
    history_ = reconcile_metrics_file(metrics_path, 0, "");
    return;
  }
  const int64_t steps_per_epoch = train_loader_->batches_per_epoch();
  auto try_load = [&](const std::string& path) {
    LoadedCheckpoint c = read_training_checkpoint(path);
    check_resumable(c, trajectory_text_, *parts_.model, *optimizer_, steps_per_epoch);
    return c;
  };
  if (mode != "auto") {
    adopt(try_load(mode));
    return;
  }
  // Newest first; only loading and checking may fail over to an older checkpoint (adopting
  // one changes the folder, so its errors end the run).
  std::string newest_reason;
  for (auto it = existing.rbegin(); it != existing.rend(); ++it) {
    const std::string path = checkpoints_->path(it->name);
    std::optional<LoadedCheckpoint> chosen;
    try {
      chosen = try_load(path);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::InvalidInput && e.kind() != ErrorKind::Runtime) throw;
      HG_LOG_WARN("skipping checkpoint {}: {}", path, e.message());
      if (newest_reason.empty()) newest_reason = e.message();
      continue;
    }
    adopt(*chosen);
    return;
  }
  throw_invalid(fmt::format("none of the {} checkpoint(s) in {} can continue this run; the newest: {}",
                            existing.size(), checkpoints_->dir(), newest_reason),
                "fix the cause (for a changed config, resume with the one the run started with), "
                "or pass a new --run-dir to start over");
}

void Trainer::adopt(const LoadedCheckpoint& ckpt) {
  restore_training_checkpoint(ckpt, *parts_.model, *optimizer_);
  const TrainingState& s = ckpt.state;
  start_ = s;
  micro_plan_ = MicroBatchPlan::restore(s.micro_batch > 0 ? std::to_string(s.micro_batch) : "",
                                        micro_plan_, ckpt.file.path);
  if (scaler_ && !s.loss_scale.empty()) {
    double scale = 0, good = 0;
    HG_CHECK(std::sscanf(s.loss_scale.c_str(), "%lf %lf", &scale, &good) == 2 && scale > 0,
             "bad checkpoint {}: loss_scale metadata '{}' is not 'scale good_steps'",
             ckpt.file.path, s.loss_scale);
    scaler_->load_state(Tensor::from_vector<float>({float(scale), 0.0f, float(good)}, {3}));
  }
  best_test_acc_ = s.best_test_acc;
  last_epoch_record_ = s.last_epoch_record;
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
    HG_LOG_WARN("checkpoint {} was written with {} compute threads, this run has {}: it continues "
                "correctly but not bit-identically to an uninterrupted run", ckpt.file.path,
                s.threads, num_threads());
  history_ = reconcile_metrics_file(options_.run_dir + "/metrics.jsonl", s.epoch,
                                    s.last_epoch_record);
  HG_LOG_INFO("resuming from {}: epoch {}, batch {} (step {})", ckpt.file.path, s.epoch + 1,
              s.batch, s.step);
}

std::string Trainer::poll_stop() {
  ledger_->charge_elapsed();
  if (ledger_->should_warn()) HG_LOG_WARN("budget: {}", ledger_->summary());
  // Leave room for the final checkpoint and evaluation.
  if (ledger_->must_stop(step_seconds_.value(), checkpoint_stall_max_ + last_eval_seconds_))
    return "the budget";
  if (stop_requested()) {
    std::string reason = consume_stop_request();
    if (!reason.empty()) return reason;
  }
  if (options_.stop_after_steps > 0 && steps_this_run_ >= options_.stop_after_steps)
    return fmt::format("--stop-after {}", options_.stop_after_steps);
  const std::string stop_file = options_.run_dir + "/STOP";
  if (::access(stop_file.c_str(), F_OK) == 0) {
    std::error_code ec;
    fs::remove(stop_file, ec);   // consumed, so that resuming continues
    return "the STOP file";
  }
  return "";
}

double Trainer::write_checkpoint(const EpochProgress& p, int64_t epoch, int64_t next_batch,
                                 bool epoch_end) {
  const auto t0 = Clock::now();
  TrainingState s;
  s.epoch = epoch;
  s.batch = next_batch;
  s.step = optimizer_->step_count();
  if (!epoch_end) {
    s.loss_sum = p.loss_sum.item();
    s.correct = p.correct.item();
    s.samples = p.samples;
    s.train_seconds = p.train_seconds();
    s.checkpoint_seconds = p.checkpoint_seconds;
  }
  s.best_test_acc = best_test_acc_;
  s.best_checkpoint = best_checkpoint_;
  s.last_epoch_record = last_epoch_record_;
  s.seed = run_.seed;
  s.threads = num_threads();
  s.micro_batch = micro_plan_.micro_batch_size();
  if (scaler_) {
    const std::vector<float> st = scaler_->state().to_vector<float>();
    s.loss_scale = fmt::format("{} {}", st[0], st[2]);
  }
  s.config_text = trajectory_text_;
  s.config_hash = trajectory_hash_;
  const std::string name = CheckpointDir::file_name(s.step);
  const std::string path = checkpoints_->path(name);
  try {
    save_training_checkpoint(path, *parts_.model, *optimizer_, config_, s);
  } catch (const Error& e) {
    throw Error(e.kind(),
                fmt::format("{}; {}", e.message(),
                            last_checkpoint_.empty()
                                ? "the run has no earlier checkpoint"
                                : fmt::format("the previous checkpoint {} is intact", last_checkpoint_)),
                "free disk space (or fix the cause above), then continue the run with --resume auto");
  }
  checkpoints_->commit(name, best_checkpoint_);
  last_checkpoint_ = path;
  last_checkpoint_time_ = Clock::now();
  const double stall = seconds_since(t0);
  checkpoint_seconds_total_ += stall;
  checkpoint_stall_max_ = std::max(checkpoint_stall_max_, stall);
  std::error_code ec;
  const double mb = double(fs::file_size(path, ec)) / 1e6;
  // Mid-epoch checkpoints would break a progress bar redrawn in place; log them at debug there.
  const bool quiet = !epoch_end && options_.progress && ::isatty(STDERR_FILENO);
  spdlog::log(quiet ? spdlog::level::debug : spdlog::level::info,
              "checkpoint {} ({:.1f} MB): the step loop waited {:.3f} s", path, mb, stall);
  return stall;
}

bool Trainer::train_epoch(int64_t epoch, std::vector<EpochMetrics>& history) {
  nn::Module& model = *parts_.model;
  model.train();
  const Device device = run_.device;
  Tensor step_loss = Tensor::zeros({}, DType::F32, device);
  Tensor step_correct = Tensor::zeros({}, DType::F32, device);
  // A resumed epoch continues from the checkpoint's position and partial sums.
  const bool resumed = epoch == start_.epoch;
  const int64_t first_batch = resumed ? start_.batch : 0;
  EpochProgress p;
  p.loss_sum = Tensor::full({}, resumed ? start_.loss_sum : 0.0, DType::F32, device);
  p.correct = Tensor::full({}, resumed ? start_.correct : 0.0, DType::F32, device);
  p.samples = resumed ? start_.samples : 0;
  p.train_seconds_before = resumed ? start_.train_seconds : 0;
  p.checkpoint_seconds = resumed ? start_.checkpoint_seconds : 0;
  const CheckpointConfig& policy = run_.checkpoint;
  Tensor previous_loss;
  const int64_t batches = train_loader_->batches_per_epoch();
  obs::ProgressBar progress(options_.progress,
                            fmt::format("epoch {}/{}", epoch + 1, run_.train.epochs), batches);
  p.segment_start = Clock::now();
  int64_t segment_samples = 0;
  train_loader_->start_epoch(epoch, first_batch);
  int64_t index = first_batch;
  while (auto batch = train_loader_->next()) {
    const int64_t step = optimizer_->step_count();
    optimizer_->set_lr(schedule_->lr(step));
    Tensor images = batch->images.to(device);
    Tensor labels = batch->labels.to(device);
    const int64_t n = labels.size(0);
    const auto step_start = Clock::now();
    if (buffers_before_step_) buffers_before_step_->save();
    try {
      accumulate_with_oom_retry(micro_plan_, oom_recovery_, step, n, [&](int64_t) {
        // Restartable: the sums are per step, so a retried step does not count twice.
        step_loss.zero_();
        step_correct.zero_();
        const int64_t parts = micro_plan_.micro_batches(n);
        for (int64_t k = 0; k < parts; ++k) {
          const RowRange r = micro_batch_rows(n, parts, k);
          nn::set_dropout_context({run_.seed, uint64_t(step), uint64_t(r.begin)});
          Tensor x = parts == 1 ? images : images.narrow(0, r.begin, r.size());
          Tensor y = parts == 1 ? labels : labels.narrow(0, r.begin, r.size());
          Tensor logits = model.forward(x);
          Tensor loss = fn::cross_entropy(logits, y, run_.train.label_smoothing);
          {
            autograd::NoGradGuard no_grad;
            ops::add_(step_loss, loss, double(r.size()));
            ops::add_(step_correct, ops::count_correct(logits, y));
          }
          // Each micro-batch's mean loss weighted by its share of the batch: the accumulated
          // gradient equals the full batch's.
          autograd::backward(parts == 1 ? loss : fn::mul_scalar(loss, double(r.size()) / double(n)),
                             scaler_ ? scaler_->seed() : Tensor());
          previous_loss = loss;
        }
      });
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      write_checkpoint(p, epoch, index, false);   // this batch is redone on resume
      throw Error(e.kind(), fmt::format("{}; checkpoint {}", e.message(), last_checkpoint_),
                  e.remedy());
    }
    {
      autograd::NoGradGuard no_grad;
      ops::add_(p.loss_sum, step_loss);
      ops::add_(p.correct, step_correct);
    }
    if (scaler_) scaler_->unscale(flat_);
    if (run_.train.clip_grad_norm > 0) optim::clip_grad_norm_tensor(flat_, run_.train.clip_grad_norm);
    optimizer_->step();
    if (scaler_) scaler_->update();
    optimizer_->zero_grad();
    p.samples += n;
    segment_samples += n;
    ++index;
    ++steps_this_run_;
    step_seconds_.add(seconds_since(step_start));
    if (progress.wants_update(index)) {
      const double elapsed = seconds_since(p.segment_start);
      progress.update(index, {{"loss", previous_loss.item()},
                              {"img/s", elapsed > 0 ? double(segment_samples) / elapsed : 0.0}});
    }
    // Between steps: a requested stop, else a checkpoint when one is due (the epoch's last
    // step is checkpointed after the evaluation instead).
    const std::string stop = poll_stop();
    if (!stop.empty()) {
      write_checkpoint(p, epoch, index, false);
      stopped_ = true;
      stop_reason_ = stop;
      progress.finish(fmt::format("stopped at step {} ({})", optimizer_->step_count(), stop));
      return false;
    }
    const int64_t done = optimizer_->step_count();
    const bool due =
        (policy.every_steps > 0 && done % policy.every_steps == 0) ||
        (policy.every_seconds > 0 && seconds_since(last_checkpoint_time_) >= policy.every_seconds);
    if (index < batches && due) p.checkpoint_seconds += write_checkpoint(p, epoch, index, false);
  }
  EpochMetrics m;
  m.epoch = epoch + 1;
  const double train_seconds = p.train_seconds();
  m.train_loss = p.samples ? p.loss_sum.item() / double(p.samples) : 0;
  m.train_acc = p.samples ? p.correct.item() / double(p.samples) : 0;
  m.images_per_s = train_seconds > 0 ? double(p.samples) / train_seconds : 0;
  HG_CHECK(std::isfinite(m.train_loss), "training diverged in epoch {}: the loss is {}", m.epoch,
           m.train_loss);
  EvalResult eval = evaluate(model, *test_loader_, device);
  last_eval_seconds_ = eval.seconds;
  m.test_loss = eval.loss;
  m.test_acc = eval.accuracy;
  // The rate of the epoch's last step (from the schedule: a run resumed at the epoch's end
  // has not set it).
  m.lr = optimizer_->step_count() > 0 ? schedule_->lr(optimizer_->step_count() - 1) : optimizer_->lr();
  m.checkpoint_seconds = p.checkpoint_seconds;
  m.epoch_seconds = train_seconds + eval.seconds;
  if (m.test_acc > best_test_acc_) {
    best_test_acc_ = m.test_acc;
    best_checkpoint_ = CheckpointDir::file_name(optimizer_->step_count());
  }
  // The epoch-end checkpoint carries this epoch's metrics line, which a resume restores if a
  // kill lands between the checkpoint and the line.
  last_epoch_record_ = epoch_record_json(m);
  const double stall = write_checkpoint(p, epoch + 1, 0, true);
  m.checkpoint_seconds += stall;
  m.epoch_seconds += stall;
  obs::MetricsJsonl(options_.run_dir + "/metrics.jsonl").write(epoch_record(m));
  history.push_back(m);
  progress.finish(fmt::format(
      "loss {:.4f} train_acc {:.4f} test_acc {:.4f} {:.0f} img/s {:.1f}s (checkpoints {:.2f}s)",
      m.train_loss, m.train_acc, m.test_acc, m.images_per_s, m.epoch_seconds,
      m.checkpoint_seconds));
  // A stop requested during the evaluation: the epoch-end checkpoint is already written.
  if (epoch + 1 < run_.train.epochs) {
    const std::string stop = poll_stop();
    if (!stop.empty()) {
      stopped_ = true;
      stop_reason_ = stop;
      return false;
    }
  }
  return true;
}

std::vector<EpochMetrics> Trainer::run() {
  HG_LOG_INFO("run {}: {} ({} parameters) on {} in {} with {} threads, {} train / {} test images, {} steps",
              run_.name, run_.model.name, parts_.model->num_parameters(), run_.device.str(),
              optim::precision_name(run_.precision), num_threads(), parts_.train_set->size(), parts_.test_set->size(), total_steps_);
  if (ledger_->must_stop(0, 0))
    throw_invalid(fmt::format("the budget is spent: {}", ledger_->summary()),
                  "raise --budget / --budget-usd, or record this phase in a new --ledger");
  std::vector<EpochMetrics> history = history_;
  last_checkpoint_time_ = Clock::now();
  // Training and evaluation compute in the precision's dtype (this thread only).
  autograd::AutocastGuard autocast(autocast_);
  for (int64_t epoch = start_.epoch; epoch < run_.train.epochs; ++epoch)
    if (!train_epoch(epoch, history)) {
      HG_LOG_INFO("stopped ({}) at step {} of {}; checkpoint {}", stop_reason_,
                  optimizer_->step_count(), total_steps_, last_checkpoint_);
      ledger_->set_stop_reason(stop_reason_);
      ledger_->close();
      if (ledger_->limits().has_limit()) HG_LOG_INFO("budget: {}", ledger_->summary());
      return history;
    }
  std::map<std::string, std::string> meta{
      {kConfigMetadataKey, config_.to_toml()},
      {"hourglass.epochs", std::to_string(run_.train.epochs)},
      {"hourglass.test_acc",
       fmt::format("{:.6f}", history.empty() ? 0.0 : history.back().test_acc)}};
  save_checkpoint(options_.run_dir + "/final.safetensors", *parts_.model, optimizer_.get(), meta);
  ledger_->close();
  if (ledger_->limits().has_limit()) HG_LOG_INFO("budget: {}", ledger_->summary());
  return history;
}

}  // namespace hg::train
