// A reinforcement-learning run's config: the [rl] table (the algorithm, the environment, the
// number of environment steps and the algorithm's settings under CleanRL's names) beside the
// tables every run has ([checkpoint], [metrics], [engine]). `hourglass train` takes a config
// with an [rl] table to the RL trainer (rl_trainer.h).
#pragma once

#include <cstdint>
#include <string>

#include "hourglass/base/config.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/rl/dqn.h"
#include "hourglass/rl/ppo.h"
#include "hourglass/train/config/run_config.h"

namespace hg::rl {

struct RlRunConfig {
  std::string name;  // run name (default: the config file's stem)
  uint64_t seed = 0;
  int threads = 0;                // 0: OpenMP's default
  std::string algorithm = "ppo";  // "ppo" or "dqn"
  PpoConfig ppo;                  // rl.env, rl.total_steps and the PPO keys; its seed is the run's
  DqnConfig dqn;                  // with algorithm "dqn": rl.env, rl.total_steps and the DQN keys
  // The environment (rl.env) of the run's algorithm.
  const std::string& env() const { return algorithm == "dqn" ? dqn.env : ppo.env; }
  train::CheckpointConfig checkpoint;
  train::MetricsConfig metrics;
  train::MonitorConfig monitor;  // host readings (an RL run is on the CPU)
  ops::EngineSettings engine;
};

// Whether `config` describes a reinforcement-learning run (it has rl.algorithm or rl.env).
bool is_rl_config(const Config& config);

// Reads and validates every key (errors name the key and the config's source). The device is
// the CPU and the precision fp32 (others are refused naming the key).
RlRunConfig parse_rl_run_config(const Config& config);

// What decides the run's trajectory, every key resolved, one "key = value" line each in a fixed
// order: the seed and the [rl] table. Two configs with equal texts train the same agent.
std::string rl_trajectory_text(const RlRunConfig& run);

}  // namespace hg::rl
