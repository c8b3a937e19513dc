#include "hourglass/rl/rl_trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/obs/monitor.h"
#include "hourglass/obs/tensorboard.h"
#include "hourglass/rl/policy_evaluation.h"
#include "hourglass/rl/rl_algorithm.h"
#include "hourglass/train/config/engine_config.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/run/run_history.h"
#include "hourglass/train/run/run_session.h"

namespace hg::rl {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int64_t kEvaluationEpisodes = 100;

}  // namespace

RlTrainer::RlTrainer(const Config& config, RlTrainerOptions options)
    : run_(parse_rl_run_config(config)), options_(std::move(options)) {
  if (run_.threads > 0) set_num_threads(run_.threads);
  trajectory_ = rl_trajectory_text(run_);
  algorithm_ = make_rl_algorithm(run_);
  train::SessionOptions so;
  so.run_dir = options_.run_dir;
  so.progress = false;  // an info line per log_every iterations instead
  so.resume = options_.resume;
  so.stop_after_steps = options_.stop_after_steps;
  so.budget = options_.budget;
  so.metrics = run_.metrics;
  session_ = std::make_unique<train::RunSession>(train::with_engine_keys(config, run_.engine),
                                                 run_.name, trajectory_, run_.checkpoint, so);
  auto validate = [&](const train::LoadedCheckpoint& c) {
    train::check_resumable(c, trajectory_, run_.engine, algorithm_->checkpoint_model(),
                           algorithm_->optimizer(), 0, algorithm_->batch_rows());
    const train::TrainingState& s = c.state;
    if (s.batch != 0 || s.epoch < 0 || s.epoch > algorithm_->iterations() ||
        s.step != algorithm_->updates_after(s.epoch))
      throw_invalid(fmt::format("bad checkpoint {}: metadata 'hourglass.step' = {} (iteration {}) "
                                "is not where this run stands after that iteration",
                                c.file.path, s.step, s.epoch),
                    "resume with the config the run started with, or pass a new --run-dir");
  };
  if (std::optional<train::LoadedCheckpoint> ckpt = session_->find_resume_point(validate)) {
    train::restore_training_checkpoint(*ckpt, algorithm_->checkpoint_model(),
                                       algorithm_->optimizer());
    algorithm_->restore(ckpt->state.epoch);
    last_record_ = ckpt->state.last_epoch_record;
    checkpointed_step_ = ckpt->state.step;
    session_->adopt(*ckpt);
    HG_LOG_INFO("resumed from {} at iteration {} of {} ({} environment steps)", ckpt->file.path,
                algorithm_->iteration(), algorithm_->iterations(), algorithm_->global_step());
  } else {
    session_->start_new();
  }
  session_->open_ledger();
}

RlTrainer::~RlTrainer() = default;

const std::string& RlTrainer::run_dir() const { return session_->run_dir(); }

double RlTrainer::write_checkpoint() {
  algorithm_->store();
  train::TrainingState s;
  s.epoch = algorithm_->iteration();
  s.batch = 0;
  s.step = algorithm_->optimizer().step_count();
  s.last_epoch_record = last_record_;
  s.seed = run_.seed;
  s.threads = num_threads();
  s.micro_batch = algorithm_->batch_rows();
  checkpointed_step_ = s.step;
  return session_->write_checkpoint(s, algorithm_->checkpoint_model(), algorithm_->optimizer(),
                                    /*quiet=*/false);
}

RlRunSummary RlTrainer::summary() const {
  RlRunSummary r;
  r.iterations = algorithm_->iteration();
  r.global_step = algorithm_->global_step();
  r.optimizer_steps = algorithm_->optimizer().step_count();
  r.stopped = !stop_reason_.empty();
  r.stop_reason = stop_reason_;
  r.last_checkpoint = session_->last_checkpoint();
  r.resumed_from = session_->resumed_from();
  r.run_dir = session_->run_dir();
  r.last_record = last_record_;
  r.eval_return_mean = eval_mean_;
  r.eval_return_std = eval_std_;
  return r;
}

void RlTrainer::start_monitor() {
  if (!session_->writes() || run_.monitor.every_seconds <= 0) return;
  obs::MonitorOptions mo;
  mo.every_seconds = run_.monitor.every_seconds;
  mo.csv_path = session_->run_dir() + "/monitor.csv";
  // The CPU's readings only (an RL run has no GPU and no data loader to wait for).
  monitor_step_.store(algorithm_->optimizer().step_count());
  if (run_.metrics.tensorboard)
    mo.on_sample = [this](const obs::MonitorSample& s) {
      session_->append_monitor_record(monitor_step_.load(), obs::Monitor::values(s));
    };
  monitor_ = std::make_unique<obs::Monitor>(std::move(mo), nullptr);
}

RlRunSummary RlTrainer::run() {
  RlAlgorithm& a = *algorithm_;
  const std::string& env = run_.env();
  HG_LOG_INFO("{}: {} on {}, {} iterations of {}, {}", run_.name, run_.algorithm, env,
              a.iterations(), a.describe(),
              fmt::format("{} thread{}", num_threads(), num_threads() == 1 ? "" : "s"));
  stop_reason_ = session_->start_steps();
  if (!stop_reason_.empty()) {
    session_->finish(stop_reason_);
    return summary();
  }
  start_monitor();
  int64_t steps_this_run = 0;
  double checkpoint_seconds = 0;
  const Clock::time_point run_start = Clock::now();
  while (a.iteration() < a.iterations()) {
    const Clock::time_point start = Clock::now();
    const int64_t step_before = a.optimizer().step_count();
    const RlIterationReport it = a.next();
    const double seconds = seconds_since(start);
    const int64_t step = a.optimizer().step_count();
    steps_this_run += step - step_before;
    double return_sum = 0, length_sum = 0;
    for (double r : it.episode_returns) return_sum += r;
    for (int64_t l : it.episode_lengths) length_sum += double(l);
    const auto episodes = double(it.episode_returns.size());
    const double nan = std::nan("");
    const double steps_per_s = double(a.steps_per_iteration()) / seconds;
    std::vector<std::pair<std::string, double>> record = {
        {"epoch", double(it.iteration)},
        {"global_step", double(it.global_step)},
        {"episodes", episodes},
        {"episodic_return", episodes > 0 ? return_sum / episodes : nan},
        {"episode_length", episodes > 0 ? length_sum / episodes : nan}};
    record.insert(record.end(), it.measurements.begin(), it.measurements.end());
    record.insert(record.end(), {{"steps_per_s", steps_per_s},
                                 {"iteration_seconds", seconds},
                                 {"checkpoint_seconds", checkpoint_seconds}});
    session_->append_metrics(record, step);
    monitor_step_.store(step);
    last_record_ = train::metrics_record_json(record);
    // metrics.every_steps: a per-step record when the iteration's optimizer steps passed a
    // multiple of it (steps.jsonl, steps.csv, TensorBoard's "step/").
    const int64_t every = run_.metrics.every_steps;
    if (every > 0 && step / every > step_before / every)
      session_->append_step_metrics(
          step, {{"epoch", double(it.iteration)},
                 {"time", obs::unix_time_now()},
                 {"elapsed_s", seconds_since(run_start)},
                 {"global_step", double(it.global_step)},
                 {"loss", it.loss},
                 {"lr", it.learning_rate},
                 {"episodic_return", episodes > 0 ? return_sum / episodes : nan},
                 {"steps_per_s", steps_per_s}});
    checkpoint_seconds = 0;
    const bool last = a.iteration() == a.iterations();
    if (options_.log_every > 0 &&
        (it.iteration == 1 || last || it.iteration % options_.log_every == 0))
      HG_LOG_INFO(
          "iteration {}/{}: {} environment steps, mean return {} over {} episodes, {:.0f} "
          "steps/s",
          it.iteration, a.iterations(), it.global_step,
          episodes > 0 ? fmt::format("{:.1f}", return_sum / episodes) : "-",
          it.episode_returns.size(), steps_per_s);
    if (!last) {
      stop_reason_ =
          session_->poll_stop(steps_this_run, seconds, session_->checkpoint_seconds_max());
      if (!stop_reason_.empty()) {
        write_checkpoint();
        HG_LOG_INFO("stopped at iteration {} ({}); checkpoint {}", a.iteration(), stop_reason_,
                    session_->last_checkpoint());
        monitor_.reset();
        session_->finish(stop_reason_);
        return summary();
      }
      if (session_->checkpoint_due(step)) checkpoint_seconds = write_checkpoint();
    }
  }
  // The last checkpoint covers the whole run, so a stop during the evaluation loses nothing.
  if (checkpointed_step_ != a.optimizer().step_count()) write_checkpoint();
  monitor_.reset();
  stop_reason_ = session_->start_finishing();
  if (!stop_reason_.empty()) {
    session_->finish(stop_reason_);
    return summary();
  }
  const PolicyEvaluation eval = a.evaluate(kEvaluationEpisodes, run_.seed + 1000);
  eval_mean_ = eval.mean;
  eval_std_ = eval.std;
  HG_LOG_INFO("evaluation: mean return {:.1f} +- {:.1f} over {} greedy episodes", eval.mean,
              eval.std, kEvaluationEpisodes);
  session_->save_final(a.policy(), a.optimizer(),
                       {{"algorithm", run_.algorithm},
                        {"env", env},
                        {"global_step", std::to_string(a.global_step())},
                        {"eval_return_mean", fmt::format("{}", eval.mean)},
                        {"eval_episodes", std::to_string(kEvaluationEpisodes)}});
  session_->finish("");
  return summary();
}

}  // namespace hg::rl
