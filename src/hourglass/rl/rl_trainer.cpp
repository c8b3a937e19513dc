#include "hourglass/rl/rl_trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>

#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/obs/monitor.h"
#include "hourglass/obs/tensorboard.h"
#include "hourglass/rl/policy_evaluation.h"
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

// What a checkpoint of an RL run holds: the agent's tensors under "agent." and the
// environments' state as tensors of their own (f64 and i64, written and checked like any
// model tensor), copied in from the environments before each checkpoint and out after a restore.
class PpoCheckpointModel : public nn::Module {
 public:
  PpoCheckpointModel(std::shared_ptr<ActorCritic> agent, const VectorEnvState& shape,
                     const RewardNormalizer* rewards)
      : Module("PpoRunState") {
    register_module("agent", std::move(agent));
    const auto copies = int64_t(shape.steps.size());
    physics_ =
        register_buffer("env_physics", Tensor::zeros({int64_t(shape.physics.size())}, DType::F64));
    steps_ = register_buffer("env_steps", Tensor::zeros({copies}, DType::I64));
    episodes_ = register_buffer("env_episodes", Tensor::zeros({copies}, DType::I64));
    returns_ = register_buffer("env_returns", Tensor::zeros({copies}, DType::F64));
    if (rewards != nullptr) {  // the reward normaliser: [mean, var, count] and each copy's return
      reward_stats_ = register_buffer("reward_stats", Tensor::zeros({3}, DType::F64));
      reward_returns_ = register_buffer("reward_returns", Tensor::zeros({copies}, DType::F64));
    }
  }
  Tensor forward(const Tensor& x) override { return x; }  // never called: a container

  void store(const VectorEnvState& s, const RewardNormalizer* rewards) {
    std::copy(s.physics.begin(), s.physics.end(), physics_.data<double>());
    std::copy(s.steps.begin(), s.steps.end(), steps_.data<int64_t>());
    for (size_t i = 0; i < s.episodes.size(); ++i)
      episodes_.data<int64_t>()[i] = int64_t(s.episodes[i]);
    std::copy(s.returns.begin(), s.returns.end(), returns_.data<double>());
    if (rewards != nullptr) {
      double* stats = reward_stats_.data<double>();
      stats[0] = rewards->stats.mean[0];
      stats[1] = rewards->stats.var[0];
      stats[2] = rewards->stats.count;
      std::copy(rewards->discounted.begin(), rewards->discounted.end(),
                reward_returns_.data<double>());
    }
  }
  VectorEnvState load(const std::string& id, uint64_t seed, RewardNormalizer* rewards) const {
    VectorEnvState s;
    s.id = id;
    s.seed = seed;
    const double* p = physics_.data<double>();
    s.physics.assign(p, p + physics_.numel());
    const int64_t* st = steps_.data<int64_t>();
    s.steps.assign(st, st + steps_.numel());
    const int64_t* ep = episodes_.data<int64_t>();
    for (int64_t i = 0; i < episodes_.numel(); ++i) s.episodes.push_back(uint64_t(ep[i]));
    const double* r = returns_.data<double>();
    s.returns.assign(r, r + returns_.numel());
    if (rewards != nullptr) {
      const double* stats = reward_stats_.data<double>();
      rewards->stats.mean[0] = stats[0];
      rewards->stats.var[0] = stats[1];
      rewards->stats.count = stats[2];
      const double* g = reward_returns_.data<double>();
      rewards->discounted.assign(g, g + reward_returns_.numel());
    }
    return s;
  }

 private:
  Tensor physics_, steps_, episodes_, returns_, reward_stats_, reward_returns_;
};

std::unique_ptr<ActorCritic> load_agent(const RlRunConfig& run, const SafetensorsFile& file) {
  std::unique_ptr<ActorCritic> agent = make_agent(run.ppo);
  // final.safetensors names the agent's tensors as they are; a checkpoint puts them under
  // "agent." beside the environments' state.
  const bool in_checkpoint = file.find("agent.actor.0.weight") != nullptr;
  std::map<std::string, Tensor> state;
  for (const NamedTensor& t : file.tensors) {
    if (!in_checkpoint) {
      state.emplace(t.name, t.tensor);
    } else if (t.name.rfind("agent.", 0) == 0) {
      state.emplace(t.name.substr(6), t.tensor);
    }
  }
  agent->load_state_dict(state, file.path);
  return agent;
}

RlTrainer::RlTrainer(const Config& config, RlTrainerOptions options)
    : run_(parse_rl_run_config(config)), options_(std::move(options)) {
  if (run_.threads > 0) set_num_threads(run_.threads);
  trajectory_ = rl_trajectory_text(run_);
  agent_ = make_agent(run_.ppo);
  agent_->initialize(run_.seed);
  ppo_ = std::make_unique<PpoRun>(run_.ppo, *agent_, run_.engine);
  model_ =
      std::make_unique<PpoCheckpointModel>(agent_, ppo_->env().state(), ppo_->reward_normalizer());
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
    train::check_resumable(c, trajectory_, run_.engine, *model_, ppo_->optimizer(),
                           ppo_->updates_per_iteration(), ppo_->minibatch_rows());
  };
  if (std::optional<train::LoadedCheckpoint> ckpt = session_->find_resume_point(validate)) {
    train::restore_training_checkpoint(*ckpt, *model_, ppo_->optimizer());
    ppo_->restore(ckpt->state.epoch,
                  model_->load(run_.ppo.env, run_.seed, ppo_->reward_normalizer()));
    last_record_ = ckpt->state.last_epoch_record;
    checkpointed_step_ = ckpt->state.step;
    session_->adopt(*ckpt);
    HG_LOG_INFO("resumed from {} at iteration {} of {} ({} environment steps)", ckpt->file.path,
                ppo_->iteration(), ppo_->iterations(), ppo_->global_step());
  } else {
    session_->start_new();
  }
  session_->open_ledger();
}

RlTrainer::~RlTrainer() = default;

const std::string& RlTrainer::run_dir() const { return session_->run_dir(); }

double RlTrainer::write_checkpoint() {
  model_->store(ppo_->env().state(), ppo_->reward_normalizer());
  train::TrainingState s;
  s.epoch = ppo_->iteration();
  s.batch = 0;
  s.step = ppo_->optimizer().step_count();
  s.last_epoch_record = last_record_;
  s.seed = run_.seed;
  s.threads = num_threads();
  s.micro_batch = ppo_->minibatch_rows();
  checkpointed_step_ = s.step;
  return session_->write_checkpoint(s, *model_, ppo_->optimizer(), /*quiet=*/false);
}

RlRunSummary RlTrainer::summary() const {
  RlRunSummary r;
  r.iterations = ppo_->iteration();
  r.global_step = ppo_->global_step();
  r.optimizer_steps = ppo_->optimizer().step_count();
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
  monitor_step_.store(ppo_->optimizer().step_count());
  if (run_.metrics.tensorboard)
    mo.on_sample = [this](const obs::MonitorSample& s) {
      session_->append_monitor_record(monitor_step_.load(), obs::Monitor::values(s));
    };
  monitor_ = std::make_unique<obs::Monitor>(std::move(mo), nullptr);
}

RlRunSummary RlTrainer::run() {
  HG_LOG_INFO("{}: {} on {}, {} iterations of {} environment steps ({} copies x {} steps), {}",
              run_.name, run_.algorithm, run_.ppo.env, ppo_->iterations(),
              run_.ppo.num_envs * run_.ppo.num_steps, run_.ppo.num_envs, run_.ppo.num_steps,
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
  while (ppo_->iteration() < ppo_->iterations()) {
    const Clock::time_point start = Clock::now();
    const PpoIteration it = ppo_->next();
    const double seconds = seconds_since(start);
    steps_this_run += ppo_->updates_per_iteration();
    double return_sum = 0, length_sum = 0;
    for (double r : it.episode_returns) return_sum += r;
    for (int64_t l : it.episode_lengths) length_sum += double(l);
    const auto episodes = double(it.episode_returns.size());
    const double nan = std::nan("");
    const std::vector<std::pair<std::string, double>> record = {
        {"epoch", double(it.iteration)},
        {"global_step", double(it.global_step)},
        {"episodes", episodes},
        {"episodic_return", episodes > 0 ? return_sum / episodes : nan},
        {"episode_length", episodes > 0 ? length_sum / episodes : nan},
        {"policy_loss", it.policy_loss},
        {"value_loss", it.value_loss},
        {"entropy", it.entropy},
        {"approx_kl", it.approx_kl},
        {"clip_fraction", it.clip_fraction},
        {"lr", it.learning_rate},
        {"steps_per_s", double(run_.ppo.num_envs * run_.ppo.num_steps) / seconds},
        {"iteration_seconds", seconds},
        {"checkpoint_seconds", checkpoint_seconds}};
    session_->append_metrics(record, ppo_->optimizer().step_count());
    monitor_step_.store(ppo_->optimizer().step_count());
    last_record_ = train::metrics_record_json(record);
    // metrics.every_steps: a per-step record when the iteration's optimizer steps passed a
    // multiple of it (steps.jsonl, steps.csv, TensorBoard's "step/").
    const int64_t every = run_.metrics.every_steps, step = ppo_->optimizer().step_count();
    if (every > 0 && step / every > (step - ppo_->updates_per_iteration()) / every)
      session_->append_step_metrics(
          step, {{"epoch", double(it.iteration)},
                 {"time", obs::unix_time_now()},
                 {"elapsed_s", seconds_since(run_start)},
                 {"global_step", double(it.global_step)},
                 {"loss", it.policy_loss - run_.ppo.ent_coef * it.entropy +
                              run_.ppo.vf_coef * it.value_loss},
                 {"lr", it.learning_rate},
                 {"episodic_return", episodes > 0 ? return_sum / episodes : nan},
                 {"steps_per_s", double(run_.ppo.num_envs * run_.ppo.num_steps) / seconds}});
    checkpoint_seconds = 0;
    const bool last = ppo_->iteration() == ppo_->iterations();
    if (options_.log_every > 0 &&
        (it.iteration == 1 || last || it.iteration % options_.log_every == 0))
      HG_LOG_INFO(
          "iteration {}/{}: {} environment steps, mean return {} over {} episodes, {:.0f} "
          "steps/s",
          it.iteration, ppo_->iterations(), it.global_step,
          episodes > 0 ? fmt::format("{:.1f}", return_sum / episodes) : "-",
          it.episode_returns.size(), double(run_.ppo.num_envs * run_.ppo.num_steps) / seconds);
    if (!last) {
      stop_reason_ =
          session_->poll_stop(steps_this_run, seconds, session_->checkpoint_seconds_max());
      if (!stop_reason_.empty()) {
        write_checkpoint();
        HG_LOG_INFO("stopped at iteration {} ({}); checkpoint {}", ppo_->iteration(), stop_reason_,
                    session_->last_checkpoint());
        monitor_.reset();
        session_->finish(stop_reason_);
        return summary();
      }
      if (session_->checkpoint_due(ppo_->optimizer().step_count()))
        checkpoint_seconds = write_checkpoint();
    }
  }
  // The last checkpoint covers the whole run, so a stop during the evaluation loses nothing.
  if (checkpointed_step_ != ppo_->optimizer().step_count()) write_checkpoint();
  monitor_.reset();
  stop_reason_ = session_->start_finishing();
  if (!stop_reason_.empty()) {
    session_->finish(stop_reason_);
    return summary();
  }
  const PolicyEvaluation eval =
      evaluate_agent(*agent_, run_.ppo, kEvaluationEpisodes, run_.seed + 1000);
  eval_mean_ = eval.mean;
  eval_std_ = eval.std;
  HG_LOG_INFO("evaluation: mean return {:.1f} +- {:.1f} over {} greedy episodes", eval.mean,
              eval.std, kEvaluationEpisodes);
  session_->save_final(*agent_, ppo_->optimizer(),
                       {{"algorithm", run_.algorithm},
                        {"env", run_.ppo.env},
                        {"global_step", std::to_string(ppo_->global_step())},
                        {"eval_return_mean", fmt::format("{}", eval.mean)},
                        {"eval_episodes", std::to_string(kEvaluationEpisodes)}});
  session_->finish("");
  return summary();
}

}  // namespace hg::rl
