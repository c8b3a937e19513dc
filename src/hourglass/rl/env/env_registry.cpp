// make_vector_env and vector_env_ids: every environment family's ids in one place.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hourglass/base/error.h"
#include "hourglass/rl/env/classic_control.h"
#include "hourglass/rl/env/vector_env.h"

namespace hg::rl {

std::vector<std::string> vector_env_ids() { return classic_control_ids(); }

std::unique_ptr<VectorEnv> make_vector_env(std::string_view id, int64_t copies) {
  if (auto env = make_classic_control(id, copies)) return env;
  throw_invalid(fmt::format("unknown environment '{}': hourglass has {}", id,
                            fmt::join(vector_env_ids(), ", ")));
}

}  // namespace hg::rl
