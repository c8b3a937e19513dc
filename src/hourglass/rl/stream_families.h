// The Philox stream families of the rl layer's randomness: the second coordinate of
// mix_stream(family, ...) under a run's seed, one per use, so that no two draw the same numbers.
#pragma once

#include <cstdint>

namespace hg::rl {

enum StreamFamily : uint64_t {
  kPpoInit = 1,      // PPO's layer initialisation: (family, layer)
  kPpoActions = 2,   // PPO's action draws: (family, iteration, step)
  kPpoShuffle = 3,   // PPO's minibatch order: (family, iteration, epoch)
  kDqnInit = 11,     // DQN's layer initialisation: (family, layer)
  kDqnExplore = 12,  // DQN's exploration draws: (family, step)
  kDqnReplay = 13,   // DQN's replay samples: (family, step)
};

}  // namespace hg::rl
