// A trained policy's return: greedy episodes on a vector environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hourglass/nn/module.h"

namespace hg::rl {

// The mean return of `episodes` episodes of `agent` acting greedily (the action of the highest
// score of its output: an actor's logits, a Q-network's values) on `env_id`, from the seed's
// resets, and each episode's return.
struct PolicyEvaluation {
  double mean = 0, std = 0;
  std::vector<double> returns;
};
PolicyEvaluation evaluate_policy(nn::Module& agent, const std::string& env_id, int64_t episodes,
                                 uint64_t seed);

}  // namespace hg::rl
