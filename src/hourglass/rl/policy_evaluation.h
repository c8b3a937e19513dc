// A trained policy's return: greedy episodes on a vector environment.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hourglass/nn/module.h"

namespace hg::rl {

// The mean return of `episodes` episodes of `agent` acting greedily on `env_id`, from the
// seed's resets, and each episode's return. Discrete actions: the action of the highest score of
// the agent's output (an actor's logits, a Q-network's values); continuous ones: the output
// itself (a Gaussian policy's mean; the environment clips it). `prepare` (optional) transforms
// each batch of observations [rows, size] in place before the agent sees it (an agent's
// observation normalisation, frozen).
struct PolicyEvaluation {
  double mean = 0, std = 0;
  std::vector<double> returns;
};
using ObservationTransform = std::function<void(float* observations, int64_t rows)>;
PolicyEvaluation evaluate_policy(nn::Module& agent, const std::string& env_id, int64_t episodes,
                                 uint64_t seed, const ObservationTransform& prepare = {});

}  // namespace hg::rl
