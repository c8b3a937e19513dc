// What the RL trainer (rl_trainer.h) drives: one algorithm's run (PPO or DQN) advanced an
// iteration at a time, with what its checkpoints hold as one module of tensors, its metrics
// line per iteration, its greedy evaluation and the policy final.safetensors keeps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/nn/module.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/rl/policy_evaluation.h"
#include "hourglass/rl/rl_config.h"
#include "hourglass/tensor/safetensors.h"

namespace hg::rl {

// One iteration's report: the counts, the episodes that ended, and the algorithm's own
// measurements (name and value, in metrics.jsonl's order).
struct RlIterationReport {
  int64_t iteration = 0;
  int64_t global_step = 0;
  std::vector<double> episode_returns;
  std::vector<int64_t> episode_lengths;
  double loss = 0;           // the loss the optimizer minimised (steps.jsonl's "loss")
  double learning_rate = 0;  // the last update's
  std::vector<std::pair<std::string, double>> measurements;
};

class RlAlgorithm {
 public:
  virtual ~RlAlgorithm() = default;
  virtual int64_t iterations() const = 0;
  virtual int64_t iteration() const = 0;    // completed
  virtual int64_t global_step() const = 0;  // environment steps so far
  virtual int64_t steps_per_iteration() const = 0;
  // The optimizer steps the run has taken after `iteration` iterations (where a checkpoint of
  // that iteration must stand) and the rows of one, for checkpoints' checks.
  virtual int64_t updates_after(int64_t iteration) const = 0;
  virtual int64_t batch_rows() const = 0;
  virtual optim::Optimizer& optimizer() = 0;
  virtual RlIterationReport next() = 0;
  // What a checkpoint holds: the networks and the run's state as tensors. store() copies the
  // live state in before a checkpoint; restore() continues after `iteration` from what a
  // checkpoint loaded into it (the optimizer restored by the caller).
  virtual nn::Module& checkpoint_model() = 0;
  virtual void store() = 0;
  virtual void restore(int64_t iteration) = 0;
  // The trained policy acting greedily; the module final.safetensors holds.
  virtual PolicyEvaluation evaluate(int64_t episodes, uint64_t seed) = 0;
  virtual nn::Module& policy() = 0;
  // The settings line of the run's start ("4 copies x 128 steps", ...).
  virtual std::string describe() const = 0;
};

// The run's algorithm (run.algorithm), built and initialised from the run's seed.
std::unique_ptr<RlAlgorithm> make_rl_algorithm(const RlRunConfig& run);

// The policy a run's final.safetensors or one of its checkpoints holds, built for the config's
// algorithm, environment and sizes (a checkpoint's tensors are under its policy's prefix), and
// its greedy evaluation. Throws InvalidInput naming the file and a missing or mis-shaped tensor.
class LoadedPolicy {
 public:
  virtual ~LoadedPolicy() = default;
  virtual PolicyEvaluation evaluate(int64_t episodes, uint64_t seed) = 0;
};
std::unique_ptr<LoadedPolicy> load_policy(const RlRunConfig& run, const SafetensorsFile& file);

}  // namespace hg::rl
