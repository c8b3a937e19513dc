// make_vector_env and vector_env_ids: every environment hourglass has, by id, in one place.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hourglass/base/error.h"
#include "hourglass/rl/env/classic_control_dynamics.h"
#include "hourglass/rl/env/minatar_breakout_dynamics.h"
#include "hourglass/rl/env/task_env.h"
#include "hourglass/rl/env/vector_env.h"

namespace hg::rl {

std::vector<std::string> vector_env_ids() {
  return {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "Breakout-MinAtar"};
}

std::unique_ptr<VectorEnv> make_vector_env(std::string_view id, int64_t copies) {
  if (id == "CartPole-v1") return make_task_env<classic::CartPole>(id, copies);
  if (id == "Acrobot-v1") return make_task_env<classic::Acrobot>(id, copies);
  if (id == "MountainCar-v0") return make_task_env<classic::MountainCar>(id, copies);
  if (id == "Pendulum-v1") return make_task_env<classic::Pendulum>(id, copies);
  if (id == "Breakout-MinAtar") return make_task_env<minatar::Breakout>(id, copies);
  throw_invalid(fmt::format("unknown environment '{}': hourglass has {}", id,
                            fmt::join(vector_env_ids(), ", ")));
}

}  // namespace hg::rl
