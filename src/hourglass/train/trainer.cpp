#include "hourglass/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>

#include "hourglass/autograd/tape.h"
#include "hourglass/base/duration.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/plural.h"
#include "hourglass/device/allocator.h"
#include "hourglass/device/trace_range.h"
#include "hourglass/nn/layers.h"
#include "hourglass/obs/progress.h"
#include "hourglass/obs/tensorboard.h"
#include "hourglass/ops/algorithm_choices.h"
#include "hourglass/ops/ops.h"
#include "hourglass/ops/tuning_cache.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/tensor/scalar_read.h"
#include "hourglass/train/config/engine_config.h"
#include "hourglass/train/evaluate.h"
#include "hourglass/train/run/checkpoint_dir.h"
#include "hourglass/train/run_profiler.h"

namespace hg::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The checkpoint a resume will most likely continue from: the named file, or with "auto" the
// newest in the run directory; "" for a new run.
std::string resume_candidate(const TrainerOptions& o) {
  if (o.resume != "auto") return o.resume;
  const std::string folder = o.run_dir + "/checkpoints";
  const auto entries = CheckpointDir::list_folder(folder);
  return entries.empty() ? std::string() : folder + "/" + entries.back().name;
}

// A resumed run computes as the run it continues did: it takes the checkpoint's engine
// settings over the config's, and says so. A checkpoint that cannot be read is left to the
// resume itself to report.
void adopt_recorded_engine(RunConfig& run, const TrainerOptions& options) {
  const std::string path = resume_candidate(options);
  if (path.empty()) return;
  ops::EngineSettings recorded;
  try {
    recorded = recorded_engine(read_safetensors_metadata(path), path);
  } catch (const Error&) {
    return;
  }
  const std::string difference = describe_engine_difference(recorded, run.engine, "the config");
  if (difference.empty()) return;
  HG_LOG_WARN("resuming from {}: the run keeps the engine settings it was trained with: {}", path,
              difference);
  run.engine = recorded;
}

RunConfig prepare(const Config& config, const TrainerOptions& options) {
  HG_CHECK(!options.run_dir.empty(), "the trainer needs a run directory");
  RunConfig run = parse_run_config(config);
  // With the budget keys (RunSession reads them) every key is read: one nobody read is a
  // misspelling, refused before the data is loaded or the run directory is touched.
  resolve_budget_settings(config, options.budget);
  config.reject_unused_keys();
  adopt_recorded_engine(run, options);
  if (run.threads > 0) set_num_threads(run.threads);
  if (options.memory_limit > 0) {
    allocator_for(run.device).set_limit(options.memory_limit);
    HG_LOG_INFO("{} memory limited to {:.2f} GiB (--memory-limit)", run.device.str(),
                double(options.memory_limit) / double(size_t(1) << 30));
  }
  return run;
}

// This process's place in a data-parallel job (alone: rank 0 of 1).
Shard shard_of(const TrainerOptions& o) {
  return o.communicator ? Shard{o.communicator->rank(), o.communicator->size()} : Shard{};
}

SessionOptions session_options(const TrainerOptions& o, const MetricsConfig& metrics) {
  const Shard shard = shard_of(o);
  // One progress bar for the job: rank 0's.
  return {o.run_dir,   o.progress && shard.rank == 0,
          o.resume,    o.stop_after_steps,
          o.budget,    shard.rank,
          shard.count, metrics};
}

// How many steps apart the ranks of a GPU job exchange their stop and checkpoint requests:
// each exchange waits for the device, so it is not done every step (a stop lands at most this
// many steps late). Host communicators exchange after every step.
constexpr int64_t kDeviceDecisionInterval = 8;

// How many steps apart the epoch's running loss is checked for NaN and infinity, besides before
// every checkpoint and at the epoch's end: a diverged run ends within this many steps on the
// CPU, twice as many on a GPU (check_loss_finite). fp16 steps skipped by the loss scaler have a
// finite loss.
constexpr int64_t kDivergenceCheckInterval = 8;

}  // namespace

// The epoch's running totals. Loss and correct count stay on the device during the epoch (no
// step waits for the host); a checkpoint reads them.
struct Trainer::EpochProgress {
  int64_t epoch = 0;
  int64_t index = 0;  // the next batch's position in the epoch
  Tensor loss_sum, correct;
  int64_t samples = 0;
  int64_t segment_samples = 0;      // trained since this process began the epoch
  double train_seconds_before = 0;  // spent in this epoch before a resume
  Clock::time_point segment_start = Clock::now();
  Clock::time_point loop_tick = Clock::now();  // the step loop's clock (step window, monitor)
  double checkpoint_seconds = 0;
  double data_wait_seconds = 0;  // in loader.next(), this process
  // The process's algorithm planning when the epoch (or its resumed part) began.
  double planning_seconds_before = ops::algorithm_planning().seconds;
  // The divergence check's read of loss_sum (a GPU's is taken one check later), and the
  // progress line's read of the last step's loss with the value it shows.
  ScalarRead loss_sum_read, shown_loss_read;
  std::optional<double> shown_loss;  // none before the first read has finished
  double train_seconds() const { return train_seconds_before + seconds_since(segment_start); }
};

Trainer::Trainer(const Config& config, TrainerOptions options)
    : run_(prepare(config, options)),
      setup_(build_training(run_, shard_of(options), TrainLoaderStart::BeforeWarmUp)),
      loader_started_for_(setup_.train_loader_epoch) {
  if (options.communicator != nullptr)
    dp_ = std::make_unique<DataParallel>(*options.communicator, run_.device,
                                         run_.distributed.bucket_bytes);
  // Checked before the run directory is touched: a bad budget flag leaves nothing behind.
  // config.toml and every checkpoint record the engine settings in force, each key resolved.
  session_ = std::make_unique<RunSession>(with_engine_keys(config, run_.engine), run_.name,
                                          trajectory_config_text(run_), run_.checkpoint,
                                          session_options(options, run_.metrics));
  const std::string trajectory = trajectory_config_text(run_);
  auto validate = [&](const LoadedCheckpoint& c) {
    check_resumable(c, trajectory, run_.engine, model(), *setup_.optimizer, setup_.steps_per_epoch,
                    run_.train.batch_size);
  };
  if (run_.train.ema_decay > 0)
    ema_ = std::make_unique<WeightAverage>(setup_.flat, run_.train.ema_decay);
  std::optional<LoadedCheckpoint> ckpt;
  if (session_->writes()) ckpt = session_->find_resume_point(validate);
  if (dp_) {  // every rank continues from the checkpoint rank 0 chose
    const std::string path = dp_->broadcast(ckpt ? ckpt->file.path : std::string());
    if (!session_->writes() && !path.empty()) {
      ckpt = read_training_checkpoint(path);
      validate(*ckpt);
    }
  }
  if (ckpt)
    adopt(*ckpt);
  else
    session_->start_new();
  session_->open_ledger();
  if (dp_) {
    dp_->broadcast_parameters(setup_.flat);
    if (run_.train.recompute.mode == RecomputeMode::Auto) {
      // Each rank probed on its own; they recompute rank 0's choice, so that every rank's
      // backward reports its gradient buckets in the same order.
      std::string chosen;
      for (const std::string& name : setup_.step->recompute_modules())
        chosen += (chosen.empty() ? "" : ",") + name;
      chosen = dp_->broadcast(chosen);
      setup_.step->set_recompute(
          chosen.empty() ? std::vector<std::string>{}
                         : parse_recompute_text(chosen, "rank 0's train.recompute").modules);
    }
    dp_->attach(*setup_.step);
    if (run_.distributed.sync_batch_norm) nn::sync_batch_norm(model(), options.communicator);
  }
}

Trainer::~Trainer() = default;

void Trainer::adopt(const LoadedCheckpoint& ckpt) {
  restore_training_checkpoint(ckpt, model(), *setup_.optimizer);
  const TrainingState& s = ckpt.state;
  start_ = s;
  if (!session_->writes()) {  // the epoch's partial sums (over all ranks) continue on rank 0
    start_.loss_sum = start_.correct = 0;
    start_.samples = 0;
  }
  TrainStep& step = *setup_.step;
  step.micro_batch_plan() = MicroBatchPlan::restore(
      s.micro_batch > 0 ? std::to_string(s.micro_batch) : "", step.micro_batch_plan(),
      run_.train.micro_batch == kAutoMicroBatch, run_.train.batch_size, ckpt.file.path);
  if (optim::LossScaler* scaler = step.loss_scaler(); scaler && !s.loss_scale.empty()) {
    double scale = 0, good = 0;
    HG_CHECK(std::sscanf(s.loss_scale.c_str(), "%lf %lf", &scale, &good) == 2 && scale > 0,
             "bad checkpoint {}: loss_scale metadata '{}' is not 'scale good_steps'",
             ckpt.file.path, s.loss_scale);
    scaler->load_state(Tensor::from_vector<float>({float(scale), 0.0f, float(good)}, {3}));
  }
  if (setup_.schedule->observes_validation()) {
    try {
      setup_.schedule->restore_state(s.schedule_state.empty() ? "inf 0 0 -" : s.schedule_state);
    } catch (const Error& e) {
      throw_invalid(fmt::format("bad checkpoint {}: {}", ckpt.file.path, e.message()));
    }
  }
  if (ema_) ema_->restore(ckpt.file);
  best_acc_ = s.best_acc;
  last_epoch_record_ = s.last_epoch_record;
  ops::adopt_algorithm_choices(s.algorithm_choices);
  history_ = session_->adopt(ckpt);
}

std::string Trainer::poll_stop() {
  // Leave room for the final checkpoint and evaluation.
  return session_->poll_stop(steps_this_run_, step_seconds_.value(),
                             session_->checkpoint_seconds_max() + last_eval_seconds_);
}

std::string Trainer::run_progress_text(int64_t epoch) const {
  // The steps left in the run at the recent step time, and the evaluations after each epoch.
  const int64_t steps_left = setup_.total_steps - global_step();
  const int64_t every = run_.train.eval_every, epochs = run_.train.epochs;
  const int64_t evaluations_left =
      every > 0 ? epochs / every - epoch / every + (epochs % every != 0 ? 1 : 0) : 1;
  const double seconds = double(steps_left) * step_seconds_.value() +
                         double(std::max<int64_t>(evaluations_left, 1)) * last_eval_seconds_;
  std::string text = "run eta " + format_duration_clock(seconds);
  if (session_->writes()) {
    const BudgetLedger& ledger = session_->ledger();
    if (ledger.limits().has_limit())
      text += fmt::format(", budget {:.0f}% used", 100 * ledger.fraction_used());
    else if (ledger.limits().price_per_hour > 0)
      text += fmt::format(", ${:.2f} spent", ledger.spent_usd());
  }
  return text;
}

Trainer::Decision Trainer::decide(std::string stop, bool checkpoint, bool force) {
  if (!dp_) return {std::move(stop), checkpoint};
  if (pending_stop_.empty()) pending_stop_ = std::move(stop);
  pending_checkpoint_ = pending_checkpoint_ || checkpoint;
  const int64_t stop_after = session_->options().stop_after_steps;
  const bool exchange = force || !dp_->communicator().takes_device_buffers() ||
                        steps_this_run_ % kDeviceDecisionInterval == 0 ||
                        (stop_after > 0 && steps_this_run_ >= stop_after);
  if (!exchange) return {};
  std::vector<double> seen{pending_stop_.empty() ? 0.0 : 1.0,
                           session_->writes() && pending_checkpoint_ ? 1.0 : 0.0};
  dp_->sum(seen);
  Decision d;
  d.checkpoint = seen[1] > 0;
  pending_checkpoint_ = false;
  if (seen[0] > 0) {
    if (!pending_stop_.empty() && !session_->writes())
      HG_LOG_WARN("rank {}: stopping the job ({})", dp_->rank(), pending_stop_);
    d.stop = dp_->broadcast(pending_stop_.empty() ? std::string("a stop request to another rank")
                                                  : pending_stop_);
    pending_stop_.clear();
  }
  return d;
}

EvalResult Trainer::evaluate_all(data::DataLoader& loader) {
  TraceRange range("evaluate");
  EvalResult r = evaluate(model(), loader, setup_.step->context(), setup_.mover.get());
  if (!dp_) return r;
  std::vector<double> sums{r.loss * double(r.samples), r.accuracy * double(r.samples),
                           double(r.samples), r.top5 * double(r.samples)};
  dp_->sum(sums);
  r.samples = int64_t(sums[2]);
  r.loss = sums[2] > 0 ? sums[0] / sums[2] : 0;
  r.accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0;
  if (r.top5 >= 0) r.top5 = sums[2] > 0 ? sums[3] / sums[2] : 0;
  return r;
}

double Trainer::recompute_ema_batch_norm(int64_t epoch) {
  data::DataLoader* loader = setup_.batch_norm_loader.get();
  if (loader == nullptr) return 0;
  TraceRange range("ema batch norm");
  const auto start = Clock::now();
  // Epoch `epoch`'s first batches (a pure function of the seed and the epoch, so a resumed run
  // recomputes what the uninterrupted one did); whole batches where the epoch has them.
  loader->start_epoch(epoch);
  const int64_t whole = loader->source().size() / run_.train.batch_size;
  const int64_t batches = std::min(run_.train.ema_batch_norm_batches, std::max<int64_t>(whole, 1));
  ExecutionScope scope(setup_.step->context());
  nn::recompute_batch_norm_statistics(model(), batches, [&](int64_t) {
    std::optional<data::Batch> b = loader->next();
    HG_ASSERT(b.has_value(), "the batch-norm loader's epoch {} ended early", epoch);
    return loader->model_images(b->images, run_.device, setup_.mover.get());
  });
  return seconds_since(start);
}

void Trainer::evaluate_epoch(EpochMetrics& m, double& seconds) {
  if (setup_.validation_loader) {
    const EvalResult val = evaluate_all(*setup_.validation_loader);
    m.has_validation = true;
    m.val_loss = val.loss;
    m.val_acc = val.accuracy;
    m.val_top5 = val.top5;
    seconds += val.seconds;
  }
  const EvalResult eval = evaluate_all(*setup_.test_loader);
  seconds += eval.seconds;
  m.test_loss = eval.loss;
  m.test_acc = eval.accuracy;
  m.test_top5 = eval.top5;
  if (ema_) {
    // The moving average in the model's place; its batch-norm statistics (recomputed for it, or
    // averaged) are the ranks' mean, as the model's are at an epoch's end.
    ema_->with_average(setup_.flat, [&] {
      seconds += recompute_ema_batch_norm(m.epoch - 1);
      if (dp_) dp_->sync_buffers(setup_.flat.buffers);
      if (setup_.validation_loader) {
        const EvalResult val = evaluate_all(*setup_.validation_loader);
        m.ema_val_acc = val.accuracy;
        seconds += val.seconds;
      }
      const EvalResult test = evaluate_all(*setup_.test_loader);
      m.ema_test_loss = test.loss;
      m.ema_test_acc = test.accuracy;
      seconds += test.seconds;
    });
  }
}

void Trainer::write_step_record(int64_t epoch) {
  TrainStep& step = *setup_.step;
  const StepWindow w = std::exchange(step_window_, {});
  // Rank 0's samples and time stand for the job's: every rank trains an equal share.
  const double ranks = dp_ ? double(dp_->size()) : 1.0;
  std::vector<std::pair<std::string, double>> record{
      {"epoch", double(epoch + 1)},
      {"time", obs::unix_time_now()},
      {"elapsed_s", seconds_since(steps_start_)},
      {"loss", step.last_loss().item()},
      {"lr", setup_.schedule->lr(global_step() - 1)},
      {"images_per_s", w.seconds > 0 ? ranks * double(w.samples) / w.seconds : 0.0},
      {"data_wait_share", w.seconds > 0 ? w.data_wait_seconds / w.seconds : 0.0},
      {"peak_memory_mib",
       double(allocator_for(run_.device).stats().peak_in_use) / double(size_t(1) << 20)}};
  if (optim::LossScaler* scaler = step.loss_scaler())
    record.emplace_back("loss_scale", double(scaler->state().to_vector<float>()[0]));
  session_->append_step_metrics(global_step(), record);
}

void Trainer::diverged(int64_t epoch, double value, const char* what) {
  const std::string checkpoint =
      last_checkpoint().empty() ? std::string("none was written") : last_checkpoint() + " is kept";
  monitor_.reset();
  try {
    session_->finish("diverged");
  } catch (const Error& e) {  // the divergence is the error to report; this one is logged
    HG_LOG_ERROR("{}", e.one_line());
  }
  throw Error(ErrorKind::Diverged,
              fmt::format("training diverged in epoch {} by step {}: {} is {}; nothing after the "
                          "last checkpoint was saved ({})",
                          epoch + 1, global_step(), what, value, checkpoint),
              "lower optim.lr, or add a warm-up (schedule.warmup_epochs) or gradient clipping "
              "(train.clip_grad_norm); to continue from the kept checkpoint, start a new run "
              "directory");
}

void Trainer::check_loss_finite(EpochProgress& p) {
  // On a GPU the check takes the sum read at the check before, which the device has long
  // computed, and starts the next read: the host never drains the device's queue for it. Every
  // rank checks at the same steps and takes the same decision.
  std::vector<double> loss;
  if (run_.device.is_gpu()) {
    if (p.loss_sum_read.started()) loss.push_back(p.loss_sum_read.value());
    p.loss_sum_read.start(p.loss_sum);
  } else {
    loss.push_back(p.loss_sum.item());
  }
  if (loss.empty()) return;
  if (dp_) dp_->sum(loss);
  if (!std::isfinite(loss[0])) diverged(p.epoch, loss[0]);
}

double Trainer::write_checkpoint(const EpochProgress* p, int64_t epoch, int64_t next_batch) {
  TraceRange range("checkpoint");
  // Weights that are not finite are not worth a checkpoint (a finite loss may have come before
  // them): the run ends as diverged and the last checkpoint stays the newest. One reduction;
  // the ranks hold the same weights.
  {
    autograd::NoGradGuard no_grad;
    if (const double sum = ops::sum(setup_.flat.params).item(); !std::isfinite(sum))
      diverged(epoch - (p == nullptr ? 1 : 0), sum, "the weights' sum");
  }
  TrainingState s;
  s.epoch = epoch;
  s.batch = next_batch;
  s.step = setup_.optimizer->step_count();
  if (p != nullptr) {  // mid-epoch: the epoch's partial sums, over all ranks
    // The batch-norm running statistics it holds: the ranks' mean (at an epoch's end they
    // were averaged before the evaluation).
    if (dp_) dp_->sync_buffers(setup_.flat.buffers);
    std::vector<double> sums{p->loss_sum.item(), p->correct.item(), double(p->samples)};
    if (dp_) dp_->sum(sums);
    // Weights that gave a NaN loss are not worth a checkpoint either.
    if (!std::isfinite(sums[0])) diverged(epoch, sums[0]);
    s.loss_sum = sums[0];
    s.correct = sums[1];
    s.samples = int64_t(sums[2]);
    s.train_seconds = p->train_seconds();
    s.checkpoint_seconds = p->checkpoint_seconds;
  }
  s.best_acc = best_acc_;
  s.last_epoch_record = last_epoch_record_;
  s.seed = run_.seed;
  TrainStep& step = *setup_.step;
  s.micro_batch = step.micro_batch_plan().micro_batch_size();
  if (optim::LossScaler* scaler = step.loss_scaler()) {
    const std::vector<float> st = scaler->state().to_vector<float>();
    s.loss_scale = fmt::format("{} {}", st[0], st[2]);
  }
  s.algorithm_choices = ops::algorithm_choices();
  s.schedule_state = setup_.schedule->state();
  if (ema_) s.extra_tensors = ema_->named_tensors();
  return session_->write_checkpoint(s, model(), *setup_.optimizer, /*quiet=*/p != nullptr);
}

void Trainer::begin_epoch(int64_t epoch, EpochProgress& p) {
  model().train();
  const Device device = run_.device;
  data::DataLoader& loader = *setup_.train_loader;
  // A resumed epoch continues from the checkpoint's position and partial sums.
  const bool resumed = epoch == start_.epoch;
  p.epoch = epoch;
  p.index = resumed ? start_.batch : 0;
  p.loss_sum = Tensor::full({}, resumed ? start_.loss_sum : 0.0, DType::F32, device);
  p.correct = Tensor::full({}, resumed ? start_.correct : 0.0, DType::F32, device);
  p.samples = resumed ? start_.samples : 0;
  p.train_seconds_before = resumed ? start_.train_seconds : 0;
  p.checkpoint_seconds = resumed ? start_.checkpoint_seconds : 0;
  allocator_for(device).reset_peak();  // the epoch's peak (peak_memory_mib)
  p.segment_start = p.loop_tick = Clock::now();
  if (loader_started_for_ != epoch || p.index != 0) loader.start_epoch(epoch, p.index);
  loader_started_for_ = -1;
  // Progressive resizing: the side of this epoch's training images, when it is new.
  const data::SampleSource& source = loader.source();
  const int64_t side = source.height_at(epoch);
  if (run_.data.image_size_ramp.enabled() && (resumed || side != source.height_at(epoch - 1)))
    HG_LOG_INFO("epoch {}: training images {}x{} (data.image_size_ramp; evaluation at {}x{})",
                epoch + 1, side, source.width_at(epoch), source.height(), source.width());
}

std::optional<data::Batch> Trainer::next_batch(EpochProgress& p) {
  // Waiting for the loader counts as data wait: next() blocks only when no batch is ready.
  const auto wait_start = Clock::now();
  auto batch = [&] {
    TraceRange range("next batch");
    return setup_.train_loader->next();
  }();
  const double waited = seconds_since(wait_start);
  p.data_wait_seconds += waited;
  step_window_.data_wait_seconds += waited;
  if (monitor_) loop_wait_seconds_.fetch_add(waited);
  return batch;
}

void Trainer::train_batch(const data::Batch& batch, EpochProgress& p) {
  data::DataLoader& loader = *setup_.train_loader;
  TrainStep& step = *setup_.step;
  Allocator& allocator = allocator_for(run_.device);
  Tensor images = loader.model_images(batch.images, run_.device, setup_.mover.get());
  Tensor labels = batch.labels.to(run_.device);
  const int64_t n = labels.size(0);
  if (profiler_) profiler_->before_step(steps_this_run_, step.last_loss());
  // For the first step's log line: its requests to the system.
  const AllocatorStats before = steps_this_run_ == 0 ? allocator.stats() : AllocatorStats{};
  const auto step_start = Clock::now();
  try {
    const StepSums& sums = step.run(images, labels, dp_ ? loader.global_rows(p.index) : 0);
    autograd::NoGradGuard no_grad;
    ops::add_(p.loss_sum, sums.loss);
    ops::add_(p.correct, sums.correct);
    if (ema_) ema_->update(setup_.flat, global_step());
  } catch (const Error& e) {
    // Data-parallel: the other ranks wait in this step's reductions, so nothing can be
    // agreed with them; the run continues from its last checkpoint.
    if (e.kind() != ErrorKind::OutOfMemory || dp_) throw;
    write_checkpoint(&p, p.epoch, p.index);  // this batch is redone on resume
    throw Error(e.kind(), fmt::format("{}; checkpoint {}", e.message(), last_checkpoint()),
                e.remedy());
  }
  p.samples += n;
  p.segment_samples += n;
  ++p.index;
  ++steps_this_run_;
  const double step_seconds = seconds_since(step_start);
  step_seconds_.add(step_seconds);
  // How long this process took to train at all (bench/first_step.sh reads this line). The
  // step is timed on the host: on a GPU its kernels may still run, but the algorithm searches
  // of its first call, which a warm tuning cache (ops/tuning_cache.h) removes, are over.
  if (steps_this_run_ == 1)
    HG_LOG_INFO(
        "first training step issued {:.3f} s after process start (the step: {:.3f} s "
        "on the host, {:.3f} s of it planning {}, {:.3f} s in {} of the device "
        "allocator's requests to the system)",
        seconds_since_process_start(), step_seconds,
        ops::algorithm_planning().seconds - p.planning_seconds_before,
        plural(ops::algorithm_planning().passes, "algorithm"),
        allocator.stats().system_seconds - before.system_seconds,
        allocator.stats().system_allocations - before.system_allocations);
  if (profiler_) profiler_->after_step(steps_this_run_, step.last_loss());
  if (steps_this_run_ % kDivergenceCheckInterval == 0) check_loss_finite(p);
  // The step loop's clock, for the step window and the monitor's totals. The record's own
  // wait for the device falls in the next window, which then covers the device's work of its
  // steps whatever the host ran ahead.
  const auto now = Clock::now();
  const double loop_seconds = std::chrono::duration<double>(now - p.loop_tick).count();
  p.loop_tick = now;
  step_window_.samples += n;
  step_window_.seconds += loop_seconds;
  if (monitor_) {
    loop_seconds_.fetch_add(loop_seconds);
    monitor_step_.store(global_step());
  }
  const int64_t record_every = session_->writes() ? run_.metrics.every_steps : 0;
  if (record_every > 0 && global_step() % record_every == 0) write_step_record(p.epoch);
}

void Trainer::show_progress(obs::ProgressBar& progress, EpochProgress& p) {
  if (!progress.wants_update(p.index)) return;
  // The loss shown is the newest one read without waiting: the read started at the previous
  // update, which the device has long finished on a GPU (on the CPU the read is immediate).
  if (p.shown_loss_read.ready()) p.shown_loss = p.shown_loss_read.value();
  if (!p.shown_loss_read.started() || p.shown_loss_read.ready())
    p.shown_loss_read.start(setup_.step->last_loss());
  if (p.shown_loss_read.ready()) p.shown_loss = p.shown_loss_read.value();
  const double elapsed = seconds_since(p.segment_start);
  const double ranks = dp_ ? double(dp_->size()) : 1.0;  // the job's rate, about
  obs::ProgressStats stats;
  if (p.shown_loss) stats.emplace_back("loss", *p.shown_loss);
  stats.emplace_back("img/s", elapsed > 0 ? ranks * double(p.segment_samples) / elapsed : 0.0);
  progress.set_suffix(run_progress_text(p.epoch));
  progress.update(p.index, stats);
}

bool Trainer::between_steps(obs::ProgressBar& progress, EpochProgress& p) {
  // A requested stop, else a checkpoint when one is due (the epoch's last step is checkpointed
  // after the evaluation instead).
  const Decision d = decide(poll_stop(), session_->checkpoint_due(global_step()), false);
  if (!d.stop.empty()) {
    if (profiler_) profiler_->interrupt(setup_.step->last_loss());
    write_checkpoint(&p, p.epoch, p.index);
    stop_reason_ = d.stop;
    if (session_->writes())  // one line per job: rank 0's
      progress.finish(fmt::format("stopped at step {} ({})", global_step(), d.stop));
    return false;
  }
  if (p.index < setup_.train_loader->batches_per_epoch() && d.checkpoint)
    p.checkpoint_seconds += write_checkpoint(&p, p.epoch, p.index);
  return true;
}

EpochMetrics Trainer::end_epoch(EpochProgress& p) {
  const int64_t epoch = p.epoch;
  EpochMetrics m;
  m.epoch = epoch + 1;
  const double train_seconds = p.train_seconds();
  const AllocatorStats memory = allocator_for(run_.device).stats();
  m.peak_memory_mib = double(memory.peak_in_use) / double(size_t(1) << 20);
  m.reserved_memory_mib = double(memory.reserved) / double(size_t(1) << 20);
  m.memory_fragmentation =
      memory.reserved > 0
          ? std::max(0.0, 1.0 - double(memory.peak_in_use) / double(memory.reserved))
          : 0.0;
  std::vector<double> totals{p.loss_sum.item(), p.correct.item(), double(p.samples)};
  if (dp_) {
    dp_->sum(totals);
    // Evaluation and the checkpoint see the ranks' mean batch-norm statistics.
    dp_->sync_buffers(setup_.flat.buffers);
  }
  const double samples = totals[2];
  m.train_loss = samples > 0 ? totals[0] / samples : 0;
  m.train_acc = samples > 0 ? totals[1] / samples : 0;
  m.images_per_s = train_seconds > 0 ? samples / train_seconds : 0;
  if (!std::isfinite(m.train_loss)) diverged(epoch, m.train_loss);
  // Validation (when held out) decides which checkpoint is `best`; the test set is reported only.
  // Both after every eval_every-th epoch and after the last.
  const int64_t every = run_.train.eval_every;
  m.evaluated = epoch + 1 == run_.train.epochs || (every > 0 && (epoch + 1) % every == 0);
  double eval_seconds = 0;
  if (m.evaluated) {
    evaluate_epoch(m, eval_seconds);
    last_eval_seconds_ = eval_seconds;
    // schedule.name = "plateau": the validation loss may cut the rate from the next step on
    // (before the epoch's checkpoint, which keeps the decision).
    if (m.has_validation) setup_.schedule->observe(m.val_loss, global_step());
  }
  // The rate of the epoch's last step (from the schedule: a run resumed at the epoch's end
  // has not set it).
  m.lr = global_step() > 0 ? setup_.schedule->lr(global_step() - 1) : setup_.optimizer->lr();
  m.checkpoint_seconds = p.checkpoint_seconds;
  m.data_wait_seconds = p.data_wait_seconds;
  m.planning_seconds = ops::algorithm_planning().seconds - p.planning_seconds_before;
  m.epoch_seconds = train_seconds + eval_seconds;
  const double selection_acc = m.has_validation ? m.val_acc : m.test_acc;
  if (m.evaluated && selection_acc > best_acc_) {
    best_acc_ = selection_acc;
    session_->set_best_checkpoint(CheckpointDir::file_name(global_step()));
  }
  // The epoch-end checkpoint carries this epoch's metrics line, which a resume restores if a
  // kill lands between the checkpoint and the line.
  last_epoch_record_ = epoch_record_json(m);
  const double stall = write_checkpoint(nullptr, epoch + 1, 0);
  m.checkpoint_seconds += stall;
  m.epoch_seconds += stall;
  session_->append_metrics(epoch_record(m), global_step());
  return m;
}

void Trainer::report_epoch(const EpochMetrics& m, obs::ProgressBar& progress) {
  if (session_->writes()) {
    std::string scores;
    if (m.evaluated)
      scores = fmt::format(
          "{}test_acc {:.4f} {}",
          m.has_validation ? fmt::format("val_acc {:.4f} ", m.val_acc) : std::string(), m.test_acc,
          m.test_top5 >= 0 ? fmt::format("test_top5 {:.4f} ", m.test_top5) : std::string());
    const std::string summary = fmt::format(
        "loss {:.4f} train_acc {:.4f} {}{:.0f} img/s {:.1f}s (checkpoints {:.2f}s, data wait "
        "{:.2f}s{})",
        m.train_loss, m.train_acc, scores, m.images_per_s, m.epoch_seconds, m.checkpoint_seconds,
        m.data_wait_seconds,
        m.planning_seconds >= 0.005 ? fmt::format(", planning {:.2f}s", m.planning_seconds)
                                    : std::string());
    progress.finish(summary);
    log_to_file_only(fmt::format("epoch {}/{} {}", m.epoch, run_.train.epochs, summary));
  }
  // Unreadable image files (data.dataset = "folder") were replaced by the next sample; each was
  // named in a warning when first found.
  const int64_t skipped =
      setup_.train_loader->skipped_samples() + setup_.test_loader->skipped_samples() +
      (setup_.validation_loader ? setup_.validation_loader->skipped_samples() : 0);
  if (skipped > 0)
    HG_LOG_WARN("{} unreadable images skipped so far (train {}, evaluation {})", skipped,
                setup_.train_loader->skipped_samples(),
                skipped - setup_.train_loader->skipped_samples());
}

bool Trainer::train_epoch(int64_t epoch, std::vector<EpochMetrics>& history) {
  EpochProgress p;
  begin_epoch(epoch, p);
  obs::ProgressBar progress(session_->options().progress,
                            fmt::format("epoch {}/{}", epoch + 1, run_.train.epochs),
                            setup_.train_loader->batches_per_epoch());
  while (auto batch = next_batch(p)) {
    train_batch(*batch, p);
    show_progress(progress, p);
    if (!between_steps(progress, p)) return false;
  }
  if (profiler_) profiler_->interrupt(setup_.step->last_loss());  // evaluations are not profiled
  // The next epoch's batches are a pure function of (seed, epoch, index): its loader starts now,
  // so its workers build its first batches while this epoch is evaluated and checkpointed
  // instead of the next epoch's first step waiting for them (a 50-step ResNet-50 epoch fed from
  // JPEGs waited about 0.2 s at its start on the H200 host).
  if (epoch + 1 < run_.train.epochs) {
    setup_.train_loader->start_epoch(epoch + 1);
    loader_started_for_ = epoch + 1;
  }
  history.push_back(end_epoch(p));
  report_epoch(history.back(), progress);
  // A stop requested during the evaluation: the epoch-end checkpoint is already written. After
  // the last epoch run() asks the session instead (start_finishing: signals and requests only;
  // the budget left is enough for the final weights).
  if (epoch + 1 < run_.train.epochs) {
    if (std::string stop = decide(poll_stop(), false, true).stop; !stop.empty()) {
      stop_reason_ = stop;
      return false;
    }
  }
  return true;
}

std::vector<EpochMetrics> Trainer::run() {
  std::vector<EpochMetrics> history = history_;
  auto stop = [&] {
    monitor_.reset();
    HG_LOG_INFO("stopped ({}) at step {} of {}; checkpoint {}", stop_reason_, global_step(),
                setup_.total_steps, last_checkpoint().empty() ? "none" : last_checkpoint());
    session_->finish(stop_reason_);
    return history;
  };
  // A request that arrived while the run was set up stops it before its first step: nothing is
  // trained, so there is nothing to checkpoint (a resumed run keeps the one it started from).
  stop_reason_ = decide(session_->start_steps(), false, true).stop;
  if (stopped()) return stop();
  steps_start_ = Clock::now();
  if (run_.device.is_gpu()) session_->prepare_checkpoint_memory(model(), *setup_.optimizer);
  // From this line on a stop request is honoured after a step, with a checkpoint.
  HG_LOG_INFO("run {}: {} ({} parameters) on {} in {} with {}, {} train / {}{} test images, {}",
              run_.name, run_.model.name, model().num_parameters(), run_.device.str(),
              optim::precision_name(run_.precision), plural(num_threads(), "thread"),
              setup_.parts.train_set->size(),
              setup_.parts.validation_set
                  ? fmt::format("{} validation / ", setup_.parts.validation_set->size())
                  : std::string(),
              setup_.parts.test_set->size(), plural(setup_.total_steps, "step"));
  const StartupTimes& t = setup_.parts.startup;
  log_to_file_only(fmt::format(
      "start-up: from {:.3f} s after process start, datasets {:.3f} s; model (with the "
      "device's start-up) {:.3f} s, step {:.3f} s, warm-up of {} {:.3f} s, then the "
      "datasets {:.3f} s more, loaders {:.3f} s: set up {:.3f} s after process start, the run's "
      "session {:.3f} s after that",
      t.begun_after_process_start, t.data, t.model, t.step, plural(t.warm_up_shapes, "shape"),
      t.warm_up, t.data_wait, t.loaders, t.ready_after_process_start,
      seconds_since_process_start() - t.ready_after_process_start));
  if (session_->writes() && run_.monitor.every_seconds > 0) {
    obs::MonitorOptions mo;
    mo.every_seconds = run_.monitor.every_seconds;
    mo.csv_path = session_->run_dir() + "/monitor.csv";
    std::unique_ptr<GpuReader> gpus;
    if (run_.device.is_gpu()) {
      std::string why_not;
      gpus = open_gpu_reader(&why_not);
      if (!gpus) HG_LOG_INFO("monitor: {}; monitor.csv holds the host's readings", why_not);
      mo.gpu_index = run_.device.index;
    }
    mo.data_wait = [this] {
      return std::pair<double, double>{loop_wait_seconds_.load(), loop_seconds_.load()};
    };
    monitor_step_.store(global_step());
    if (run_.metrics.tensorboard)
      mo.on_sample = [this](const obs::MonitorSample& s) {
        session_->append_monitor_record(monitor_step_.load(), obs::Monitor::values(s));
      };
    monitor_ = std::make_unique<obs::Monitor>(std::move(mo), std::move(gpus));
  }
  if (session_->writes() && run_.profile.enabled)
    profiler_ = std::make_unique<RunProfiler>(run_.profile, run_.device, session_->run_dir(),
                                              session_->run_dir() + "/config.toml");
  if (dp_) {
    const GradientBuckets* buckets = setup_.step->gradient_buckets();
    HG_LOG_INFO(
        "data-parallel over {} ({}): {} rows of each batch of {} per rank, gradients "
        "summed in {} of up to {} MiB",
        plural(dp_->size(), "rank"), dp_->communicator().backend_name(),
        (run_.train.batch_size + dp_->size() - 1) / dp_->size(), run_.train.batch_size,
        plural(buckets ? int64_t(buckets->size()) : 0, "bucket"),
        run_.distributed.bucket_bytes >> 20);
  }
  for (int64_t epoch = start_.epoch; epoch < run_.train.epochs; ++epoch) {
    if (!train_epoch(epoch, history)) return stop();
    // Rank 0 holds the whole history (a resumed run's earlier epochs too) and decides.
    std::vector<double> stale_epochs{
        double(epochs_without_improvement(history, run_.train.early_stop_min_delta))};
    if (dp_) dp_->broadcast(stale_epochs);
    if (const int64_t stale = int64_t(stale_epochs[0]); run_.train.early_stop_patience > 0 &&
                                                        stale >= run_.train.early_stop_patience &&
                                                        epoch + 1 < run_.train.epochs) {
      HG_LOG_INFO(
          "stopping early after epoch {} of {}: validation accuracy has not improved "
          "for {} (train.early_stop_patience); `best` holds the best epoch's "
          "checkpoint",
          epoch + 1, run_.train.epochs, plural(stale, "epoch"));
      stopped_early_at_ = epoch + 1;
      break;
    }
  }
  // A request that arrived during the last evaluation or its checkpoint is honoured too: that
  // checkpoint covers the whole run, and resuming from it writes the final weights.
  stop_reason_ = decide(session_->start_finishing(), false, true).stop;
  if (stopped()) return stop();
  std::map<std::string, std::string> final_metadata = {
      {"hourglass.epochs", std::to_string(run_.train.epochs)},
      {"hourglass.test_acc",
       fmt::format("{:.6f}", history.empty() ? 0.0 : history.back().test_acc)}};
  if (!history.empty() && history.back().has_validation)
    final_metadata["hourglass.val_acc"] = fmt::format("{:.6f}", history.back().val_acc);
  if (stopped_early_at_ > 0)
    final_metadata["hourglass.stopped_early_after_epoch"] = std::to_string(stopped_early_at_);
  monitor_.reset();
  session_->save_final(model(), *setup_.optimizer, final_metadata);
  if (ema_) {
    std::map<std::string, std::string> ema_metadata = {
        {"hourglass.epochs", std::to_string(run_.train.epochs)},
        {"hourglass.ema_decay", fmt::format("{}", ema_->decay())}};
    if (!history.empty() && history.back().ema_test_acc >= 0)
      ema_metadata["hourglass.test_acc"] = fmt::format("{:.6f}", history.back().ema_test_acc);
    ema_->with_average(setup_.flat, [&] {
      (void)recompute_ema_batch_norm(history.empty() ? 0 : history.back().epoch - 1);
      if (dp_) dp_->sync_buffers(setup_.flat.buffers);
      session_->save_final(model(), *setup_.optimizer, ema_metadata, "final_ema.safetensors");
    });
  }
  session_->finish("");
  return history;
}

}  // namespace hg::train
