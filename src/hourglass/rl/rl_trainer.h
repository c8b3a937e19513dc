// The reinforcement-learning trainer: the run's algorithm (rl_algorithm.h: PPO or DQN) advanced
// an iteration at a time inside a RunSession (train/run/run_session.h), so an RL run has what a
// supervised one has: the run directory with config.toml and train.log, metrics.jsonl (one line per
// iteration: its "epoch"), steps.jsonl/CSV/TensorBoard, the device monitor's monitor.csv,
// checkpoints/ with rotation, --resume, stop signals,
// --stop-after, the STOP file, budgets and the ledger, final.safetensors.
//
// A checkpoint sits between iterations and holds the networks, the optimizer (state and step
// count), the environments' state (physical variables, step and episode counters, running
// returns) as tensors beside the networks' ("env_physics", ...) and DQN's replay buffer and
// target network; the iteration is the checkpoint's epoch. The draws (actions, exploration,
// minibatches, replay samples) are functions of the seed and the iteration or environment
// step, so a resumed run ends bit-identical to an uninterrupted one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/rl/rl_config.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/run/budget.h"

namespace hg::train {
class RunSession;
}
namespace hg::obs {
class Monitor;
}

namespace hg::rl {

struct RlTrainerOptions {
  std::string run_dir;
  std::string resume;            // "", "auto" or a checkpoint path (SessionOptions::resume)
  int64_t stop_after_steps = 0;  // > 0: stop (checkpointed) after this many optimizer steps
  train::BudgetFlags budget;
  // An info line every this many iterations (and at the first and last): 0 for none.
  int64_t log_every = 50;
};

struct RlRunSummary {
  int64_t iterations = 0;   // completed, this run and before a resume
  int64_t global_step = 0;  // environment steps
  int64_t optimizer_steps = 0;
  bool stopped = false;
  std::string stop_reason;
  std::string last_checkpoint, resumed_from, run_dir;
  // The last iteration's metrics line (metrics.jsonl), "" before the first.
  std::string last_record;
  // A finished run: the greedy policy's mean return over 100 evaluation episodes.
  double eval_return_mean = 0, eval_return_std = 0;
};

class RlAlgorithm;

class RlTrainer {
 public:
  // Validates the config (errors name the key), creates the run directory, takes its lock and,
  // when resuming, restores the checkpoint (errors name the file and the reason).
  RlTrainer(const Config& config, RlTrainerOptions options);
  ~RlTrainer();
  RlTrainer(const RlTrainer&) = delete;
  RlTrainer& operator=(const RlTrainer&) = delete;

  // Trains the remaining iterations, then evaluates the policy and writes final.safetensors; a
  // requested stop ends it early after a checkpoint (stopped true, no final weights).
  RlRunSummary run();
  const RlRunConfig& run_config() const { return run_; }
  const std::string& run_dir() const;

 private:
  double write_checkpoint();
  RlRunSummary summary() const;
  // The device monitor (obs/monitor.h) when monitor.every_seconds > 0: monitor.csv with the
  // host's readings, and TensorBoard's "monitor/" scalars with metrics.tensorboard.
  void start_monitor();

  RlRunConfig run_;
  std::string trajectory_;
  std::unique_ptr<RlAlgorithm> algorithm_;
  std::unique_ptr<train::RunSession> session_;
  RlTrainerOptions options_;
  std::string last_record_;
  std::string stop_reason_;
  double eval_mean_ = 0, eval_std_ = 0;
  int64_t checkpointed_step_ = -1;  // the optimizer step of the newest checkpoint
  // Declared after the session, which its thread writes to: destroyed (stopped) first.
  std::unique_ptr<obs::Monitor> monitor_;
  std::atomic<int64_t> monitor_step_{0};  // the optimizer step monitor samples are filed at
};

}  // namespace hg::rl
