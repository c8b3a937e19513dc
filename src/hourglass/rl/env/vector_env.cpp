#include "hourglass/rl/env/vector_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hourglass/base/error.h"
#include "hourglass/base/parallel.h"

namespace hg::rl {

namespace {

// Copies stepped per chunk of the thread pool: a classic-control step costs 20 ns (CartPole) to
// 1 us (Acrobot), so a few hundred copies make a chunk worth a thread.
constexpr int64_t kCopiesPerChunk = 256;

}  // namespace

double uniform_double(RandomStream& stream, double low, double high) {
  const uint64_t wide = (uint64_t(stream.next_u32()) << 32) | stream.next_u32();
  const double unit = double(wide >> 11) * 0x1.0p-53;
  return low + (high - low) * unit;
}

VectorEnv::VectorEnv(EnvSpec spec, int64_t copies, int64_t state_size)
    : spec_(std::move(spec)), copies_(copies), state_size_(state_size) {
  HG_CHECK(copies > 0, "{}: the number of copies must be positive, got {}", spec_.id, copies);
  const int64_t obs = spec_.observation_size;
  physics_.assign(size_t(copies * state_size), 0.0);
  steps_.assign(size_t(copies), 0);
  episodes_.assign(size_t(copies), 0);
  returns_.assign(size_t(copies), 0.0);
  observations_.assign(size_t(copies * obs), 0.0f);
  final_observations_.assign(size_t(copies * obs), 0.0f);
  rewards_.assign(size_t(copies), 0.0f);
  terminated_.assign(size_t(copies), 0);
  truncated_.assign(size_t(copies), 0);
  episode_returns_.assign(size_t(copies), 0.0);
  episode_lengths_.assign(size_t(copies), 0);
}

void VectorEnv::start_episode(int64_t copy) {
  RandomStream stream(seed_, mix_stream(uint64_t(copy), episodes_[size_t(copy)]));
  double* state = physics_.data() + copy * state_size_;
  reset_copy(state, stream);
  ++episodes_[size_t(copy)];
  steps_[size_t(copy)] = 0;
  returns_[size_t(copy)] = 0.0;
  observe_copy(state, observations_.data() + copy * spec_.observation_size);
}

void VectorEnv::reset(uint64_t seed) {
  seed_ = seed;
  std::fill(episodes_.begin(), episodes_.end(), 0);
  parallel_for_inline(copies_, kCopiesPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) start_episode(i);
  });
  std::fill(rewards_.begin(), rewards_.end(), 0.0f);
  std::fill(terminated_.begin(), terminated_.end(), 0);
  std::fill(truncated_.begin(), truncated_.end(), 0);
  started_ = true;
}

void VectorEnv::check_started(const char* what) const {
  HG_CHECK(started_, "{}: {} before reset(): call reset(seed) (or restore a saved state) first",
           spec_.id, what);
}

void VectorEnv::step(std::span<const int32_t> actions) {
  check_started("step");
  HG_CHECK(spec_.action_kind == ActionKind::Discrete,
           "{}: takes {} continuous action value(s) per copy, not action indices", spec_.id,
           spec_.action_count);
  HG_CHECK(int64_t(actions.size()) == copies_, "{}: {} action(s) for {} copies", spec_.id,
           actions.size(), copies_);
  for (int64_t i = 0; i < copies_; ++i) {
    const int32_t a = actions[size_t(i)];
    HG_CHECK(a >= 0 && a < spec_.action_count,
             "{}: copy {}'s action {} is out of range (actions are 0 to {})", spec_.id, i, a,
             spec_.action_count - 1);
  }
  step_all(actions.data(), nullptr);
}

void VectorEnv::step(std::span<const float> actions) {
  check_started("step");
  HG_CHECK(spec_.action_kind == ActionKind::Continuous,
           "{}: takes one action index per copy (0 to {}), not continuous values", spec_.id,
           spec_.action_count - 1);
  HG_CHECK(int64_t(actions.size()) == copies_ * spec_.action_count,
           "{}: {} action value(s) for {} copies of {} dimension(s)", spec_.id, actions.size(),
           copies_, spec_.action_count);
  for (size_t k = 0; k < actions.size(); ++k)
    HG_CHECK(!std::isnan(actions[k]), "{}: copy {}'s action is NaN", spec_.id,
             int64_t(k) / spec_.action_count);
  step_all(nullptr, actions.data());
}

void VectorEnv::step_all(const int32_t* discrete, const float* continuous) {
  const int64_t obs = spec_.observation_size;
  parallel_for_inline(copies_, kCopiesPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double* state = physics_.data() + i * state_size_;
      const StepOutcome outcome =
          step_copy(state, discrete ? discrete + i : nullptr,
                    continuous ? continuous + i * spec_.action_count : nullptr);
      const size_t c = size_t(i);
      ++steps_[c];
      returns_[c] += outcome.reward;
      rewards_[c] = float(outcome.reward);
      // Gymnasium's TimeLimit: the step that reaches the limit truncates, terminated or not.
      const bool truncated = steps_[c] >= spec_.max_episode_steps;
      terminated_[c] = outcome.terminated;
      truncated_[c] = truncated;
      if (outcome.terminated || truncated) {
        observe_copy(state, final_observations_.data() + i * obs);
        episode_returns_[c] = returns_[c];
        episode_lengths_[c] = steps_[c];
        start_episode(i);
      } else {
        observe_copy(state, observations_.data() + i * obs);
      }
    }
  });
}

VectorEnvState VectorEnv::state() const {
  check_started("state");
  return {spec_.id, seed_, physics_, steps_, episodes_, returns_};
}

void VectorEnv::restore(const VectorEnvState& state) {
  const auto n = size_t(copies_);
  HG_CHECK(state.id == spec_.id, "{}: the saved environment state is of {}", spec_.id, state.id);
  HG_CHECK(state.steps.size() == n && state.episodes.size() == n && state.returns.size() == n &&
               state.physics.size() == n * size_t(state_size_),
           "{}: the saved environment state holds {} copies, this environment {}: set the "
           "number of copies the run was saved with",
           spec_.id, state.steps.size(), copies_);
  for (size_t i = 0; i < n; ++i)
    HG_CHECK(state.steps[i] >= 0 && state.steps[i] < spec_.max_episode_steps,
             "{}: the saved state's copy {} is at step {} of an episode limited to {}", spec_.id, i,
             state.steps[i], spec_.max_episode_steps);
  for (size_t i = 0; i < n; ++i)
    HG_CHECK(valid_copy(state.physics.data() + i * size_t(state_size_)),
             "{}: the saved state's copy {} is not a state of this environment (a value out of "
             "its range, or not finite)",
             spec_.id, i);
  seed_ = state.seed;
  physics_ = state.physics;
  steps_ = state.steps;
  episodes_ = state.episodes;
  returns_ = state.returns;
  for (int64_t i = 0; i < copies_; ++i)
    observe_copy(physics_.data() + i * state_size_,
                 observations_.data() + i * spec_.observation_size);
  std::fill(rewards_.begin(), rewards_.end(), 0.0f);
  std::fill(terminated_.begin(), terminated_.end(), 0);
  std::fill(truncated_.begin(), truncated_.end(), 0);
  started_ = true;
}

}  // namespace hg::rl
