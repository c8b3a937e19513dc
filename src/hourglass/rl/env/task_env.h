// TaskEnv<Task>: a VectorEnv over a task struct that steps one copy (the classic-control tasks
// of classic_control_dynamics.h, MinAtar's Breakout of minatar_breakout_dynamics.h). A task
// gives its sizes (kStateSize doubles of state, kObservationSize floats of observation), either
// kActions (discrete) or kActionDims and kMaxTorque (continuous, clipped to +-kMaxTorque),
// kMaxEpisodeSteps, optionally kRewardThreshold, and the static functions
// reset(state, uniform(low, high)), step(state, action) -> {reward, terminated} and
// observe(state, observation); and optionally valid(state), whether a saved state is one the
// task can be in (without it: every value finite).
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <string_view>

#include "hourglass/rl/env/vector_env.h"

namespace hg::rl {

template <typename Task>
constexpr bool kContinuousTask = requires {
  Task::kActionDims;
};

template <typename Task>
EnvSpec task_spec(std::string id) {
  EnvSpec spec;
  spec.id = std::move(id);
  spec.observation_size = Task::kObservationSize;
  spec.max_episode_steps = Task::kMaxEpisodeSteps;
  if constexpr (kContinuousTask<Task>) {
    spec.action_kind = ActionKind::Continuous;
    spec.action_count = Task::kActionDims;
    spec.action_low = -Task::kMaxTorque;
    spec.action_high = Task::kMaxTorque;
  } else {
    spec.action_kind = ActionKind::Discrete;
    spec.action_count = Task::kActions;
  }
  if constexpr (requires { Task::kRewardThreshold; })
    spec.reward_threshold = Task::kRewardThreshold;
  return spec;
}

template <typename Task>
class TaskEnv final : public VectorEnv {
 public:
  TaskEnv(std::string id, int64_t copies)
      : VectorEnv(task_spec<Task>(std::move(id)), copies, Task::kStateSize) {}

 private:
  void reset_copy(double* state, RandomStream& stream) const override {
    Task::reset(state, [&](double low, double high) { return uniform_double(stream, low, high); });
  }
  StepOutcome step_copy(double* state, const int32_t* discrete,
                        const float* continuous) const override {
    if constexpr (kContinuousTask<Task>) {
      const auto outcome = Task::step(state, *continuous);
      return {outcome.reward, outcome.terminated};
    } else {
      const auto outcome = Task::step(state, *discrete);
      return {outcome.reward, outcome.terminated};
    }
  }
  void observe_copy(const double* state, float* observation) const override {
    Task::observe(state, observation);
  }
  bool valid_copy(const double* state) const override {
    for (int i = 0; i < Task::kStateSize; ++i)
      if (!std::isfinite(state[i])) return false;
    if constexpr (requires { Task::valid(state); }) return Task::valid(state);
    return true;
  }
};

template <typename Task>
std::unique_ptr<VectorEnv> make_task_env(std::string_view id, int64_t copies) {
  return std::make_unique<TaskEnv<Task>>(std::string(id), copies);
}

}  // namespace hg::rl
