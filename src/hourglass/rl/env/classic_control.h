// Gymnasium's classic-control tasks as vector environments: CartPole-v1, Acrobot-v1,
// MountainCar-v0 and Pendulum-v1 (dynamics in classic_control_dynamics.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/rl/env/vector_env.h"

namespace hg::rl {

std::vector<std::string> classic_control_ids();
// `copies` copies of the classic-control task `id`, or null where `id` is not one.
std::unique_ptr<VectorEnv> make_classic_control(std::string_view id, int64_t copies);

}  // namespace hg::rl
