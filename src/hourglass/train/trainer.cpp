#include "hourglass/train/trainer.h"

#include <cstdio>
#include <map>

#include "hourglass/autograd/tape.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/obs/progress.h"
#include "hourglass/ops/algorithm_choices.h"
#include "hourglass/ops/ops.h"
#include "hourglass/train/evaluate.h"

namespace hg::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

RunConfig prepare(const Config& config, const TrainerOptions& options) {
  HG_CHECK(!options.run_dir.empty(), "the trainer needs a run directory");
  RunConfig run = parse_run_config(config);
  if (run.threads > 0) set_num_threads(run.threads);
  if (options.memory_limit > 0) {
    allocator_for(run.device).set_limit(options.memory_limit);
    HG_LOG_INFO("{} memory limited to {:.2f} GiB (--memory-limit)", run.device.str(),
                double(options.memory_limit) / double(size_t(1) << 30));
  }
  return run;
}

SessionOptions session_options(const TrainerOptions& o) {
  return {o.run_dir, o.progress, o.resume, o.stop_after_steps, o.budget};
}

}  // namespace

// The epoch's running totals. Loss and correct count stay on the device during the epoch (no
// step waits for the host); a checkpoint reads them.
struct Trainer::EpochProgress {
  Tensor loss_sum, correct;
  int64_t samples = 0;
  double train_seconds_before = 0;  // spent in this epoch before a resume
  Clock::time_point segment_start = Clock::now();
  double checkpoint_seconds = 0;
  double data_wait_seconds = 0;  // in loader.next(), this process
  double train_seconds() const { return train_seconds_before + seconds_since(segment_start); }
};

Trainer::Trainer(const Config& config, TrainerOptions options)
    : run_(prepare(config, options)), setup_(build_training(run_)) {
  // Checked before the run directory is touched: a bad budget flag leaves nothing behind.
  session_ = std::make_unique<RunSession>(config, run_.name, trajectory_config_text(run_),
                                          run_.checkpoint, session_options(options));
  for (const auto& key : config.unused_keys())
    HG_LOG_WARN("{}: key '{}' is not used by hourglass (misspelled?)", config.source(), key);
  const std::string trajectory = trajectory_config_text(run_);
  auto validate = [&](const LoadedCheckpoint& c) {
    check_resumable(c, trajectory, model(), *setup_.optimizer, setup_.steps_per_epoch);
  };
  if (auto ckpt = session_->find_resume_point(validate))
    adopt(*ckpt);
  else
    session_->start_new();
  session_->open_ledger();
}

Trainer::~Trainer() = default;

void Trainer::adopt(const LoadedCheckpoint& ckpt) {
  restore_training_checkpoint(ckpt, model(), *setup_.optimizer);
  const TrainingState& s = ckpt.state;
  start_ = s;
  TrainStep& step = *setup_.step;
  step.micro_batch_plan() =
      MicroBatchPlan::restore(s.micro_batch > 0 ? std::to_string(s.micro_batch) : "",
                              step.micro_batch_plan(), ckpt.file.path);
  if (optim::LossScaler* scaler = step.loss_scaler(); scaler && !s.loss_scale.empty()) {
    double scale = 0, good = 0;
    HG_CHECK(std::sscanf(s.loss_scale.c_str(), "%lf %lf", &scale, &good) == 2 && scale > 0,
             "bad checkpoint {}: loss_scale metadata '{}' is not 'scale good_steps'",
             ckpt.file.path, s.loss_scale);
    scaler->load_state(Tensor::from_vector<float>({float(scale), 0.0f, float(good)}, {3}));
  }
  best_acc_ = s.best_acc;
  last_epoch_record_ = s.last_epoch_record;
  ops::adopt_algorithm_choices(s.algorithm_choices);
  history_ = session_->adopt(ckpt);
}

std::string Trainer::poll_stop() {
  // Leave room for the final checkpoint and evaluation.
  return session_->poll_stop(steps_this_run_, step_seconds_.value(),
                             session_->checkpoint_stall_max() + last_eval_seconds_);
}

double Trainer::write_checkpoint(const EpochProgress* p, int64_t epoch, int64_t next_batch) {
  TrainingState s;
  s.epoch = epoch;
  s.batch = next_batch;
  s.step = setup_.optimizer->step_count();
  if (p != nullptr) {  // mid-epoch: the epoch's partial sums
    s.loss_sum = p->loss_sum.item();
    s.correct = p->correct.item();
    s.samples = p->samples;
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
  return session_->write_checkpoint(s, model(), *setup_.optimizer, /*quiet=*/p != nullptr);
}

bool Trainer::train_epoch(int64_t epoch, std::vector<EpochMetrics>& history) {
  nn::Module& net = model();
  net.train();
  const Device device = run_.device;
  TrainStep& step = *setup_.step;
  data::DataLoader& loader = *setup_.train_loader;
  // A resumed epoch continues from the checkpoint's position and partial sums.
  const bool resumed = epoch == start_.epoch;
  const int64_t first_batch = resumed ? start_.batch : 0;
  EpochProgress p;
  p.loss_sum = Tensor::full({}, resumed ? start_.loss_sum : 0.0, DType::F32, device);
  p.correct = Tensor::full({}, resumed ? start_.correct : 0.0, DType::F32, device);
  p.samples = resumed ? start_.samples : 0;
  p.train_seconds_before = resumed ? start_.train_seconds : 0;
  p.checkpoint_seconds = resumed ? start_.checkpoint_seconds : 0;
  const int64_t batches = loader.batches_per_epoch();
  obs::ProgressBar progress(session_->options().progress,
                            fmt::format("epoch {}/{}", epoch + 1, run_.train.epochs), batches);
  p.segment_start = Clock::now();
  int64_t segment_samples = 0;
  loader.start_epoch(epoch, first_batch);
  int64_t index = first_batch;
  // Waiting for the loader counts as data wait: next() blocks only when no batch is ready.
  auto next_batch = [&] {
    const auto wait_start = Clock::now();
    auto b = loader.next();
    p.data_wait_seconds += seconds_since(wait_start);
    return b;
  };
  while (auto batch = next_batch()) {
    Tensor images = setup_.mover->move(batch->images);
    Tensor labels = batch->labels.to(device);
    const int64_t n = labels.size(0);
    const auto step_start = Clock::now();
    try {
      const StepSums& sums = step.run(images, labels);
      autograd::NoGradGuard no_grad;
      ops::add_(p.loss_sum, sums.loss);
      ops::add_(p.correct, sums.correct);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      write_checkpoint(&p, epoch, index);  // this batch is redone on resume
      throw Error(e.kind(), fmt::format("{}; checkpoint {}", e.message(), last_checkpoint()),
                  e.remedy());
    }
    p.samples += n;
    segment_samples += n;
    ++index;
    ++steps_this_run_;
    step_seconds_.add(seconds_since(step_start));
    if (progress.wants_update(index)) {
      const double elapsed = seconds_since(p.segment_start);
      progress.update(index, {{"loss", step.last_loss().item()},
                              {"img/s", elapsed > 0 ? double(segment_samples) / elapsed : 0.0}});
    }
    // Between steps: a requested stop, else a checkpoint when one is due (the epoch's last
    // step is checkpointed after the evaluation instead).
    if (std::string stop = poll_stop(); !stop.empty()) {
      write_checkpoint(&p, epoch, index);
      stop_reason_ = stop;
      progress.finish(fmt::format("stopped at step {} ({})", global_step(), stop));
      return false;
    }
    if (index < batches && session_->checkpoint_due(global_step()))
      p.checkpoint_seconds += write_checkpoint(&p, epoch, index);
  }
  EpochMetrics m;
  m.epoch = epoch + 1;
  const double train_seconds = p.train_seconds();
  m.train_loss = p.samples ? p.loss_sum.item() / double(p.samples) : 0;
  m.train_acc = p.samples ? p.correct.item() / double(p.samples) : 0;
  m.images_per_s = train_seconds > 0 ? double(p.samples) / train_seconds : 0;
  HG_CHECK(std::isfinite(m.train_loss), "training diverged in epoch {}: the loss is {}", m.epoch,
           m.train_loss);
  // Validation (when held out) decides which checkpoint is `best`; the test set is reported only.
  double eval_seconds = 0;
  if (setup_.validation_loader) {
    const EvalResult val =
        evaluate(net, *setup_.validation_loader, step.context(), setup_.mover.get());
    m.has_validation = true;
    m.val_loss = val.loss;
    m.val_acc = val.accuracy;
    eval_seconds += val.seconds;
  }
  const EvalResult eval = evaluate(net, *setup_.test_loader, step.context(), setup_.mover.get());
  eval_seconds += eval.seconds;
  last_eval_seconds_ = eval_seconds;
  m.test_loss = eval.loss;
  m.test_acc = eval.accuracy;
  // The rate of the epoch's last step (from the schedule: a run resumed at the epoch's end
  // has not set it).
  m.lr = global_step() > 0 ? setup_.schedule->lr(global_step() - 1) : setup_.optimizer->lr();
  m.checkpoint_seconds = p.checkpoint_seconds;
  m.data_wait_seconds = p.data_wait_seconds;
  m.epoch_seconds = train_seconds + eval_seconds;
  const double selection_acc = m.has_validation ? m.val_acc : m.test_acc;
  if (selection_acc > best_acc_) {
    best_acc_ = selection_acc;
    session_->set_best_checkpoint(CheckpointDir::file_name(global_step()));
  }
  // The epoch-end checkpoint carries this epoch's metrics line, which a resume restores if a
  // kill lands between the checkpoint and the line.
  last_epoch_record_ = epoch_record_json(m);
  const double stall = write_checkpoint(nullptr, epoch + 1, 0);
  m.checkpoint_seconds += stall;
  m.epoch_seconds += stall;
  session_->append_metrics(epoch_record(m));
  history.push_back(m);
  progress.finish(fmt::format(
      "loss {:.4f} train_acc {:.4f} {}test_acc {:.4f} {:.0f} img/s {:.1f}s (checkpoints {:.2f}s, "
      "data wait {:.2f}s)",
      m.train_loss, m.train_acc,
      m.has_validation ? fmt::format("val_acc {:.4f} ", m.val_acc) : std::string(), m.test_acc,
      m.images_per_s, m.epoch_seconds, m.checkpoint_seconds, m.data_wait_seconds));
  // Unreadable image files (data.dataset = "folder") were replaced by the next sample; each was
  // named in a warning when first found.
  const int64_t skipped =
      setup_.train_loader->skipped_samples() + setup_.test_loader->skipped_samples() +
      (setup_.validation_loader ? setup_.validation_loader->skipped_samples() : 0);
  if (skipped > 0)
    HG_LOG_WARN("{} unreadable images skipped so far (train {}, evaluation {})", skipped,
                setup_.train_loader->skipped_samples(),
                skipped - setup_.train_loader->skipped_samples());
  // A stop requested during the evaluation: the epoch-end checkpoint is already written. After
  // the last epoch run() asks the session instead (start_finishing: signals and requests only;
  // the budget left is enough for the final weights).
  if (epoch + 1 < run_.train.epochs) {
    if (std::string stop = poll_stop(); !stop.empty()) {
      stop_reason_ = stop;
      return false;
    }
  }
  return true;
}

std::vector<EpochMetrics> Trainer::run() {
  std::vector<EpochMetrics> history = history_;
  auto stop = [&] {
    HG_LOG_INFO("stopped ({}) at step {} of {}; checkpoint {}", stop_reason_, global_step(),
                setup_.total_steps, last_checkpoint().empty() ? "none" : last_checkpoint());
    session_->finish(stop_reason_);
    return history;
  };
  // A request that arrived while the run was set up stops it before its first step: nothing is
  // trained, so there is nothing to checkpoint (a resumed run keeps the one it started from).
  stop_reason_ = session_->start_steps();
  if (stopped()) return stop();
  // From this line on a stop request is honoured after a step, with a checkpoint.
  HG_LOG_INFO(
      "run {}: {} ({} parameters) on {} in {} with {} threads, {} train / {}{} test images, {} "
      "steps",
      run_.name, run_.model.name, model().num_parameters(), run_.device.str(),
      optim::precision_name(run_.precision), num_threads(), setup_.parts.train_set->size(),
      setup_.parts.validation_set
          ? fmt::format("{} validation / ", setup_.parts.validation_set->size())
          : std::string(),
      setup_.parts.test_set->size(), setup_.total_steps);
  for (int64_t epoch = start_.epoch; epoch < run_.train.epochs; ++epoch) {
    if (!train_epoch(epoch, history)) return stop();
    if (const int64_t stale = epochs_without_improvement(history, run_.train.early_stop_min_delta);
        run_.train.early_stop_patience > 0 && stale >= run_.train.early_stop_patience &&
        epoch + 1 < run_.train.epochs) {
      HG_LOG_INFO(
          "stopping early after epoch {} of {}: validation accuracy has not improved "
          "for {} epochs (train.early_stop_patience); `best` holds the best epoch's "
          "checkpoint",
          epoch + 1, run_.train.epochs, stale);
      stopped_early_at_ = epoch + 1;
      break;
    }
  }
  // A request that arrived during the last evaluation or its checkpoint is honoured too: that
  // checkpoint covers the whole run, and resuming from it writes the final weights.
  stop_reason_ = session_->start_finishing();
  if (stopped()) return stop();
  std::map<std::string, std::string> final_metadata = {
      {"hourglass.epochs", std::to_string(run_.train.epochs)},
      {"hourglass.test_acc",
       fmt::format("{:.6f}", history.empty() ? 0.0 : history.back().test_acc)}};
  if (!history.empty() && history.back().has_validation)
    final_metadata["hourglass.val_acc"] = fmt::format("{:.6f}", history.back().val_acc);
  if (stopped_early_at_ > 0)
    final_metadata["hourglass.stopped_early_after_epoch"] = std::to_string(stopped_early_at_);
  session_->save_final(model(), *setup_.optimizer, final_metadata);
  session_->finish("");
  return history;
}

}  // namespace hg::train
