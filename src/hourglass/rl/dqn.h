// Deep Q-learning (Mnih et al. 2015) for discrete actions, in the structure and with the
// defaults of CleanRL's dqn.py: one environment copy (or several) acting epsilon-greedily with
// epsilon annealed linearly, a replay buffer of transitions sampled uniformly, a target network
// copied (tau = 1) or blended every target_network_frequency steps, the mean squared TD error
// of r + gamma max_a' Q_target(s', a') (no bootstrap past a terminal state), Adam. The
// Q-network is Linear-ReLU-Linear-ReLU-Linear (120, 84), initialised as PyTorch's Linear is.
//
// Deterministic for a seed: resets, exploration draws and replay samples come from Philox
// streams of (seed, step). Each update is one TrainStep::run whose loss is the TD error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/nn/module.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/rl/env/vector_env.h"

namespace hg::rl {

struct DqnConfig {
  std::string env = "CartPole-v1";
  int64_t total_steps = 500000;  // environment steps, all copies together
  int64_t num_envs = 1;
  double learning_rate = 2.5e-4;
  int64_t buffer_size = 10000;
  double gamma = 0.99;
  double tau = 1.0;  // 1: the target network is a copy
  int64_t target_network_frequency = 500;
  int64_t batch_size = 128;
  double start_e = 1.0, end_e = 0.05;
  double exploration_fraction = 0.5;  // of total_steps, over which epsilon falls
  int64_t learning_starts = 10000;
  int64_t train_frequency = 10;
  std::vector<int64_t> hidden = {120, 84};
  uint64_t seed = 1;
  // Environment steps per iteration of a DqnRun (what a run directory reports and checkpoints
  // between); a multiple of num_envs.
  int64_t iteration_steps = 10000;
};

// Throws InvalidInput naming the first key out of range.
void validate(const DqnConfig& config);

// Observation -> one value per action, through ReLU layers of the given widths.
class QNetwork : public nn::Module {
 public:
  QNetwork(int64_t observation_size, int64_t actions, const std::vector<int64_t>& hidden);
  Tensor forward(const Tensor& x) override;
  // PyTorch's Linear initialisation: weights and biases uniform in +-1/sqrt(fan_in), from
  // Philox streams of `seed`.
  void initialize(uint64_t seed);

 private:
  std::shared_ptr<nn::Module> net_;
};

struct DqnProgress {
  int64_t global_step = 0;
  double epsilon = 0;
  double td_loss = 0;                   // the last update's, 0 before learning starts
  double q_mean = 0;                    // the mean Q(s, a) of the last update's batch
  std::vector<double> episode_returns;  // episodes ended since the last report
  std::vector<int64_t> episode_lengths;
};

// One iteration of a DqnRun: iteration_steps environment steps and the updates among them.
struct DqnIteration {
  int64_t iteration = 0;
  int64_t global_step = 0;
  double epsilon = 0;   // at the iteration's last step
  int64_t updates = 0;  // during this iteration
  // The iteration's last update's TD loss and mean Q(s, a) of its batch; NaN without one.
  double td_loss = 0, q_mean = 0;
  std::vector<double> episode_returns;  // episodes ended during the iteration
  std::vector<int64_t> episode_lengths;
};

// A DQN run in progress, advanced an iteration at a time. Between iterations the run is the
// Q-network, the target network's parameters, the optimizer, the replay buffer (state()) and
// the environments' state; its draws are functions of the seed and the environment step, so a
// run restored from those continues bit-identically.
class DqnRun {
 public:
  // Validates `config`, builds the environments (reset from config.seed) and puts `q`'s
  // parameters into the optimizer's arena (the target network a copy); the training step runs
  // under `engine`.
  DqnRun(const DqnConfig& config, QNetwork& q, const ops::EngineSettings& engine = {});
  ~DqnRun();
  DqnRun(const DqnRun&) = delete;
  DqnRun& operator=(const DqnRun&) = delete;

  int64_t iterations() const;   // ceil(total_steps / iteration_steps)
  int64_t iteration() const;    // completed
  int64_t global_step() const;  // environment steps so far
  int64_t batch_rows() const;   // the rows of an update's batch
  // The updates taken in the first `iteration` iterations (none before learning_starts).
  int64_t updates_after(int64_t iteration) const;
  DqnIteration next();

  // What a checkpoint holds besides the Q-network, the optimizer and the environments: the
  // target network's flat parameters, the replay buffer's transitions (observations, next
  // observations, actions, rewards, terminations) and its fill and write position. The tensors
  // are the run's own (a checkpoint reads them and restore() writes into them).
  struct State {
    Tensor target_params;   // f32 [parameters]
    Tensor obs, next_obs;   // f32 [buffer_size, observation size]
    Tensor actions;         // i64 [buffer_size]
    Tensor rewards, dones;  // f32 [buffer_size]
    Tensor fill;            // i64 [2]: transitions held, next slot written
  };
  State& state();
  // Continues after `iteration` completed iterations with the environments in `env_state` (the
  // Q-network, the optimizer and state() restored by the caller).
  void restore(int64_t iteration, const VectorEnvState& env_state);

  VectorEnv& env();
  optim::Optimizer& optimizer();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct DqnResult {
  int64_t global_step = 0;
  int64_t updates = 0;
};

// Trains `q` (built for the environment's sizes and config.hidden) on config.env.
// `on_progress` (optional) sees the run every `report_every` environment steps.
DqnResult train_dqn(const DqnConfig& config, QNetwork& q,
                    const std::function<void(const DqnProgress&)>& on_progress = {},
                    int64_t report_every = 10000);

}  // namespace hg::rl
