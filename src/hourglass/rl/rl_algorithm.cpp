#include "hourglass/rl/rl_algorithm.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "hourglass/base/error.h"
#include "hourglass/rl/dqn.h"
#include "hourglass/rl/ppo.h"

namespace hg::rl {

namespace {

// A container module: its tensors are what a checkpoint holds.
class StateModule : public nn::Module {
 public:
  explicit StateModule(const char* name) : Module(name) {}
  Tensor forward(const Tensor& x) override { return x; }  // never called
  using Module::register_buffer;
  using Module::register_module;
};

// The environments' state as tensors of a checkpoint module (f64 and i64, written and checked
// like any model tensor), copied in before each checkpoint and out after a restore.
class EnvStateTensors {
 public:
  EnvStateTensors(StateModule& owner, const VectorEnvState& shape) {
    const auto copies = int64_t(shape.steps.size());
    physics_ = owner.register_buffer("env_physics",
                                     Tensor::zeros({int64_t(shape.physics.size())}, DType::F64));
    steps_ = owner.register_buffer("env_steps", Tensor::zeros({copies}, DType::I64));
    episodes_ = owner.register_buffer("env_episodes", Tensor::zeros({copies}, DType::I64));
    returns_ = owner.register_buffer("env_returns", Tensor::zeros({copies}, DType::F64));
  }
  void store(const VectorEnvState& s) {
    std::copy(s.physics.begin(), s.physics.end(), physics_.data<double>());
    std::copy(s.steps.begin(), s.steps.end(), steps_.data<int64_t>());
    for (size_t i = 0; i < s.episodes.size(); ++i)
      episodes_.data<int64_t>()[i] = int64_t(s.episodes[i]);
    std::copy(s.returns.begin(), s.returns.end(), returns_.data<double>());
  }
  VectorEnvState load(const std::string& id, uint64_t seed) const {
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
    return s;
  }

 private:
  Tensor physics_, steps_, episodes_, returns_;
};

// PPO: the agent under "agent.", the environments' state and the reward normaliser's
// ([mean, var, count] and each copy's discounted return).
class PpoAlgorithm final : public RlAlgorithm {
 public:
  explicit PpoAlgorithm(const RlRunConfig& run)
      : config_(run.ppo), seed_(run.seed), agent_(make_agent(run.ppo)) {
    agent_->initialize(run.seed);
    ppo_ = std::make_unique<PpoRun>(run.ppo, *agent_, run.engine);
    model_.register_module("agent", agent_);
    env_state_ = std::make_unique<EnvStateTensors>(model_, ppo_->env().state());
    const auto copies = int64_t(ppo_->env().state().steps.size());
    if (ppo_->reward_normalizer() != nullptr) {
      reward_stats_ = model_.register_buffer("reward_stats", Tensor::zeros({3}, DType::F64));
      reward_returns_ =
          model_.register_buffer("reward_returns", Tensor::zeros({copies}, DType::F64));
    }
  }
  int64_t iterations() const override { return ppo_->iterations(); }
  int64_t iteration() const override { return ppo_->iteration(); }
  int64_t global_step() const override { return ppo_->global_step(); }
  int64_t steps_per_iteration() const override { return config_.num_envs * config_.num_steps; }
  int64_t updates_after(int64_t iteration) const override {
    return iteration * ppo_->updates_per_iteration();
  }
  int64_t batch_rows() const override { return ppo_->minibatch_rows(); }
  optim::Optimizer& optimizer() override { return ppo_->optimizer(); }
  RlIterationReport next() override {
    PpoIteration it = ppo_->next();
    RlIterationReport r;
    r.iteration = it.iteration;
    r.global_step = it.global_step;
    r.episode_returns = std::move(it.episode_returns);
    r.episode_lengths = std::move(it.episode_lengths);
    r.loss = it.policy_loss - config_.ent_coef * it.entropy + config_.vf_coef * it.value_loss;
    r.learning_rate = it.learning_rate;
    r.measurements = {{"policy_loss", it.policy_loss},
                      {"value_loss", it.value_loss},
                      {"entropy", it.entropy},
                      {"approx_kl", it.approx_kl},
                      {"clip_fraction", it.clip_fraction},
                      {"lr", it.learning_rate}};
    return r;
  }
  nn::Module& checkpoint_model() override { return model_; }
  void store() override {
    env_state_->store(ppo_->env().state());
    if (const RewardNormalizer* rewards = ppo_->reward_normalizer()) {
      double* stats = reward_stats_.data<double>();
      stats[0] = rewards->stats.mean[0];
      stats[1] = rewards->stats.var[0];
      stats[2] = rewards->stats.count;
      std::copy(rewards->discounted.begin(), rewards->discounted.end(),
                reward_returns_.data<double>());
    }
  }
  void restore(int64_t iteration) override {
    if (RewardNormalizer* rewards = ppo_->reward_normalizer()) {
      const double* stats = reward_stats_.data<double>();
      rewards->stats.mean[0] = stats[0];
      rewards->stats.var[0] = stats[1];
      rewards->stats.count = stats[2];
      const double* g = reward_returns_.data<double>();
      rewards->discounted.assign(g, g + reward_returns_.numel());
    }
    ppo_->restore(iteration, env_state_->load(config_.env, seed_));
  }
  PolicyEvaluation evaluate(int64_t episodes, uint64_t seed) override {
    return evaluate_agent(*agent_, config_, episodes, seed);
  }
  nn::Module& policy() override { return *agent_; }
  std::string describe() const override {
    return fmt::format("{} environment steps an iteration ({} copies x {} steps)",
                       config_.num_envs * config_.num_steps, config_.num_envs, config_.num_steps);
  }

 private:
  PpoConfig config_;
  uint64_t seed_;
  std::shared_ptr<ActorCritic> agent_;
  std::unique_ptr<PpoRun> ppo_;
  StateModule model_{"PpoRunState"};
  std::unique_ptr<EnvStateTensors> env_state_;
  Tensor reward_stats_, reward_returns_;
};

std::shared_ptr<QNetwork> make_q_network(const DqnConfig& config) {
  const auto probe = make_vector_env(config.env, 1);
  return std::make_shared<QNetwork>(probe->spec().observation_size, probe->spec().action_count,
                                    config.hidden);
}

// DQN: the Q-network under "q.", the target network's parameters, the replay buffer and the
// environments' state.
class DqnAlgorithm final : public RlAlgorithm {
 public:
  explicit DqnAlgorithm(const RlRunConfig& run)
      : config_(run.dqn), seed_(run.seed), q_(make_q_network(run.dqn)) {
    q_->initialize(run.seed);
    dqn_ = std::make_unique<DqnRun>(run.dqn, *q_, run.engine);
    model_.register_module("q", q_);
    DqnRun::State& s = dqn_->state();
    // The run's own tensors: a checkpoint's values are loaded straight into them.
    model_.register_buffer("target_params", s.target_params);
    model_.register_buffer("replay_obs", s.obs);
    model_.register_buffer("replay_next_obs", s.next_obs);
    model_.register_buffer("replay_actions", s.actions);
    model_.register_buffer("replay_rewards", s.rewards);
    model_.register_buffer("replay_dones", s.dones);
    model_.register_buffer("replay_fill", s.fill);
    env_state_ = std::make_unique<EnvStateTensors>(model_, dqn_->env().state());
  }
  int64_t iterations() const override { return dqn_->iterations(); }
  int64_t iteration() const override { return dqn_->iteration(); }
  int64_t global_step() const override { return dqn_->global_step(); }
  int64_t steps_per_iteration() const override { return config_.iteration_steps; }
  int64_t updates_after(int64_t iteration) const override { return dqn_->updates_after(iteration); }
  int64_t batch_rows() const override { return dqn_->batch_rows(); }
  optim::Optimizer& optimizer() override { return dqn_->optimizer(); }
  RlIterationReport next() override {
    DqnIteration it = dqn_->next();
    RlIterationReport r;
    r.iteration = it.iteration;
    r.global_step = it.global_step;
    r.episode_returns = std::move(it.episode_returns);
    r.episode_lengths = std::move(it.episode_lengths);
    r.loss = it.td_loss;
    r.learning_rate = config_.learning_rate;
    r.measurements = {{"td_loss", it.td_loss},
                      {"q_values", it.q_mean},
                      {"epsilon", it.epsilon},
                      {"updates", double(it.updates)},
                      {"lr", config_.learning_rate}};
    return r;
  }
  nn::Module& checkpoint_model() override { return model_; }
  void store() override { env_state_->store(dqn_->env().state()); }
  void restore(int64_t iteration) override {
    dqn_->restore(iteration, env_state_->load(config_.env, seed_));
  }
  PolicyEvaluation evaluate(int64_t episodes, uint64_t seed) override {
    return evaluate_policy(*q_, config_.env, episodes, seed);
  }
  nn::Module& policy() override { return *q_; }
  std::string describe() const override {
    return fmt::format("{} environment steps an iteration ({} cop{}), replay buffer {}",
                       config_.iteration_steps, config_.num_envs,
                       config_.num_envs == 1 ? "y" : "ies", config_.buffer_size);
  }

 private:
  DqnConfig config_;
  uint64_t seed_;
  std::shared_ptr<QNetwork> q_;
  std::unique_ptr<DqnRun> dqn_;
  StateModule model_{"DqnRunState"};
  std::unique_ptr<EnvStateTensors> env_state_;
};

// The tensors of `file` that belong to the policy: all of final.safetensors, or those under
// `prefix` in a checkpoint.
std::map<std::string, Tensor> policy_tensors(const SafetensorsFile& file, const std::string& prefix,
                                             const std::string& probe) {
  const bool in_checkpoint = file.find(prefix + probe) != nullptr;
  std::map<std::string, Tensor> state;
  for (const NamedTensor& t : file.tensors) {
    if (!in_checkpoint)
      state.emplace(t.name, t.tensor);
    else if (t.name.rfind(prefix, 0) == 0)
      state.emplace(t.name.substr(prefix.size()), t.tensor);
  }
  return state;
}

class LoadedPpoPolicy final : public LoadedPolicy {
 public:
  LoadedPpoPolicy(const RlRunConfig& run, const SafetensorsFile& file)
      : config_(run.ppo), agent_(make_agent(run.ppo)) {
    agent_->load_state_dict(policy_tensors(file, "agent.", "actor.0.weight"), file.path);
  }
  PolicyEvaluation evaluate(int64_t episodes, uint64_t seed) override {
    return evaluate_agent(*agent_, config_, episodes, seed);
  }

 private:
  PpoConfig config_;
  std::unique_ptr<ActorCritic> agent_;
};

class LoadedQPolicy final : public LoadedPolicy {
 public:
  LoadedQPolicy(const RlRunConfig& run, const SafetensorsFile& file)
      : env_(run.dqn.env), q_(make_q_network(run.dqn)) {
    q_->load_state_dict(policy_tensors(file, "q.", "net.0.weight"), file.path);
  }
  PolicyEvaluation evaluate(int64_t episodes, uint64_t seed) override {
    return evaluate_policy(*q_, env_, episodes, seed);
  }

 private:
  std::string env_;
  std::shared_ptr<QNetwork> q_;
};

}  // namespace

std::unique_ptr<RlAlgorithm> make_rl_algorithm(const RlRunConfig& run) {
  if (run.algorithm == "dqn") return std::make_unique<DqnAlgorithm>(run);
  return std::make_unique<PpoAlgorithm>(run);
}

std::unique_ptr<LoadedPolicy> load_policy(const RlRunConfig& run, const SafetensorsFile& file) {
  if (run.algorithm == "dqn") return std::make_unique<LoadedQPolicy>(run, file);
  return std::make_unique<LoadedPpoPolicy>(run, file);
}

}  // namespace hg::rl
