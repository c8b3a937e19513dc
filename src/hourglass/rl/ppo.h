// Proximal Policy Optimization (Schulman et al. 2017) in the structure and with the defaults of
// CleanRL's ppo.py (discrete actions) and ppo_continuous_action.py (continuous ones): N
// environment copies stepped for T steps per iteration, generalised advantage estimation, E
// epochs of M shuffled minibatches, the clipped policy objective, a clipped value loss, an
// entropy bonus, advantages normalised per minibatch, global gradient-norm clipping, Adam
// (eps 1e-5) with its rate annealed linearly to 0. Separate actor and critic networks of two
// tanh layers, orthogonally initialised (gain sqrt(2), the actor's output 0.01, the critic's
// 1). Discrete actions: a categorical distribution over the actor's scores. Continuous ones: a
// diagonal Gaussian with the actor's output as its mean and a learned log standard deviation per
// dimension (independent of the observation), observations and rewards optionally normalised
// as Gymnasium's wrappers do (running_normalizer.h).
//
// Deterministic for a seed: the environments reset from Philox streams of the seed, actions are
// drawn from the stream (seed, iteration, step), minibatches shuffled from (seed, iteration,
// epoch). Each minibatch is one TrainStep::run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/nn/layers.h"
#include "hourglass/nn/module.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/rl/env/vector_env.h"
#include "hourglass/rl/policy_evaluation.h"
#include "hourglass/rl/running_normalizer.h"

namespace hg::train {
class TrainStep;
}

namespace hg::rl {

struct PpoConfig {
  std::string env = "CartPole-v1";
  int64_t total_steps = 500000;  // environment steps, all copies together
  int64_t num_envs = 4;
  int64_t num_steps = 128;  // steps per copy per iteration
  double learning_rate = 2.5e-4;
  bool anneal_lr = true;
  double gamma = 0.99;
  double gae_lambda = 0.95;
  int64_t num_minibatches = 4;
  int64_t update_epochs = 4;
  bool norm_adv = true;
  double clip_coef = 0.2;
  bool clip_vloss = true;
  double ent_coef = 0.01;
  double vf_coef = 0.5;
  double max_grad_norm = 0.5;
  int64_t hidden = 64;
  // Gymnasium's NormalizeObservation and NormalizeReward (then each clipped to +-clip_obs,
  // +-clip_reward), as CleanRL's continuous-action PPO wraps its environments.
  bool norm_obs = false;
  bool norm_reward = false;
  double clip_obs = 10.0, clip_reward = 10.0;
  uint64_t seed = 1;
};

// Throws InvalidInput naming the first key out of range.
void validate(const PpoConfig& config);

// CleanRL's defaults for an environment of `kind`: ppo.py's for discrete actions (the
// PpoConfig above), ppo_continuous_action.py's for continuous ones (1,000,000 steps, 1 copy x
// 2048 steps, learning rate 3e-4, 32 minibatches, 10 epochs, no entropy bonus, observations and
// rewards normalised).
PpoConfig ppo_defaults(ActionKind kind);

// An actor and a critic (state value) over the same observation, each
// Linear-tanh-Linear-tanh-Linear. Discrete actions: the actor's outputs are the actions' scores.
// Continuous ones: they are the Gaussian's means, and "actor_logstd" ([actions, 1], zero at
// first) holds each dimension's log standard deviation. With normalised observations the
// running statistics are the agent's too ("obs_mean", "obs_var", "obs_count", f64), so its
// checkpoints and final weights carry what an evaluation must apply.
class ActorCritic : public nn::Module {
 public:
  ActorCritic(int64_t observation_size, int64_t actions, int64_t hidden,
              ActionKind kind = ActionKind::Discrete, bool normalize_observations = false);
  // The actor's scores or means [N, actions].
  Tensor forward(const Tensor& x) override;
  // The critic's values [N].
  Tensor value(const Tensor& x);
  // Continuous actions: the log standard deviations as `rows` equal rows [rows, actions]
  // (differentiable with respect to actor_logstd).
  Tensor log_std_rows(int64_t rows);
  bool continuous() const { return kind_ == ActionKind::Continuous; }
  int64_t actions() const { return actions_; }
  // In place over `rows` observations [rows, observation_size]: with normalised observations,
  // merges them into the running statistics when `update`, then normalises them with the
  // statistics and clips them to +-clip; without, nothing.
  void normalize_observations(float* observations, int64_t rows, bool update, double clip);
  bool normalizes_observations() const { return obs_mean_.defined(); }
  // CleanRL's layer_init, from Philox streams of `seed`.
  void initialize(uint64_t seed);

 private:
  ActionKind kind_;
  int64_t actions_;
  std::shared_ptr<nn::Sequential> actor_, critic_;
  Tensor log_std_, obs_mean_, obs_var_, obs_count_;
};

// The log-probability under `agent`'s policy at observations `x` [N, size] of each row's
// action (`action`: [N, 1] action indices as floats for discrete actions, [N, dims] values for
// continuous ones) and the rows' mean entropy: a categorical over the scores, or the diagonal
// Gaussian. Differentiable; what the PPO loss is made of.
std::pair<Tensor, Tensor> policy_log_prob_entropy(ActorCritic& agent, const Tensor& x,
                                                  const Tensor& action);

// The agent `config` trains: sized for its environment, its policy for the environment's kind of
// actions, normalising observations when config.norm_obs. Not initialised.
std::unique_ptr<ActorCritic> make_agent(const PpoConfig& config);

// `episodes` greedy episodes of `agent` on config.env from `seed`'s resets (its observations
// normalised with its statistics, frozen, when it normalises them).
PolicyEvaluation evaluate_agent(ActorCritic& agent, const PpoConfig& config, int64_t episodes,
                                uint64_t seed);

// What one iteration measured (CleanRL's logged values: the last minibatch's losses).
struct PpoIteration {
  int64_t iteration = 0;
  int64_t global_step = 0;  // environment steps so far
  double learning_rate = 0;
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0;
  // Episodes that ended during this iteration's rollout: their returns and lengths.
  std::vector<double> episode_returns;
  std::vector<int64_t> episode_lengths;
};

struct PpoResult {
  int64_t iterations = 0;
  int64_t global_step = 0;
  std::vector<PpoIteration> history;
};

// One PPO run in progress: its environments, optimizer and training step, advanced an
// iteration (a rollout and its update epochs) at a time. A checkpoint sits between iterations:
// the agent, the optimizer, the iteration count and the environments' state are all a run needs
// to continue bit-identically (the draws are functions of the seed and the iteration).
class PpoRun {
 public:
  // Validates `config`, builds the environments (reset from config.seed) and puts `agent`'s
  // parameters into the optimizer's arena; the training step runs under `engine` (a run's
  // [engine] table).
  PpoRun(const PpoConfig& config, ActorCritic& agent, const ops::EngineSettings& engine = {});
  ~PpoRun();
  PpoRun(const PpoRun&) = delete;
  PpoRun& operator=(const PpoRun&) = delete;

  int64_t iterations() const;   // of the whole run: total_steps / (num_envs * num_steps)
  int64_t iteration() const;    // completed
  int64_t global_step() const;  // environment steps so far
  // Optimizer steps per iteration (update_epochs * num_minibatches) and rows per minibatch.
  int64_t updates_per_iteration() const;
  int64_t minibatch_rows() const;
  // Runs the next iteration and returns what it measured.
  PpoIteration next();
  // Continues after `iteration` completed iterations with the environments in `env_state` (the
  // agent, its observation statistics and the optimizer restored by the caller; the reward
  // normaliser's state through reward_normalizer()).
  void restore(int64_t iteration, const VectorEnvState& env_state);
  // With config.norm_reward: the rewards' running statistics and each copy's discounted return
  // (a checkpoint's part); null without.
  RewardNormalizer* reward_normalizer();

  VectorEnv& env();
  optim::Optimizer& optimizer();
  train::TrainStep& step();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Trains an agent on config.env; `on_iteration` (optional) sees each iteration as it ends.
// Returns the history; `agent` (built for the environment's sizes and config.hidden) is trained
// in place.
PpoResult train_ppo(const PpoConfig& config, ActorCritic& agent,
                    const std::function<void(const PpoIteration&)>& on_iteration = {});

}  // namespace hg::rl
