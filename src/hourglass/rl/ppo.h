// Proximal Policy Optimization (Schulman et al. 2017) for discrete actions, in the structure and
// with the defaults of CleanRL's ppo.py: N environment copies stepped for T steps per
// iteration, generalised advantage estimation, E epochs of M shuffled minibatches, the clipped
// policy objective, a clipped value loss, an entropy bonus, advantages normalised per
// minibatch, global gradient-norm clipping, Adam (eps 1e-5) with its rate annealed linearly to
// 0. Separate actor and critic networks of two tanh layers, orthogonally initialised (gain
// sqrt(2), the actor's output 0.01, the critic's 1).
//
// Deterministic for a seed: the environments reset from Philox streams of the seed, actions are
// drawn from the stream (seed, iteration, step), minibatches shuffled from (seed, iteration,
// epoch). This first version runs on the CPU, outside TrainStep.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/nn/layers.h"
#include "hourglass/nn/module.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/rl/env/vector_env.h"

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
  uint64_t seed = 1;
};

// Throws InvalidInput naming the first key out of range.
void validate(const PpoConfig& config);

// An actor (action scores) and a critic (state value) over the same observation, each
// Linear-tanh-Linear-tanh-Linear.
class ActorCritic : public nn::Module {
 public:
  ActorCritic(int64_t observation_size, int64_t actions, int64_t hidden);
  // The actor's scores [N, actions].
  Tensor forward(const Tensor& x) override;
  // The critic's values [N].
  Tensor value(const Tensor& x);
  // CleanRL's layer_init, from Philox streams of `seed`.
  void initialize(uint64_t seed);

 private:
  std::shared_ptr<nn::Sequential> actor_, critic_;
};

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
  // agent and the optimizer restored by the caller).
  void restore(int64_t iteration, const VectorEnvState& env_state);

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
