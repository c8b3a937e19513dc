#include "hourglass/rl/env/classic_control.h"

#include "hourglass/rl/env/classic_control_dynamics.h"

namespace hg::rl {

namespace {

template <typename Task>
constexpr bool kContinuous = requires {
  Task::kActionDims;
};

template <typename Task>
EnvSpec spec_of(std::string id) {
  EnvSpec spec;
  spec.id = std::move(id);
  spec.observation_size = Task::kObservationSize;
  spec.max_episode_steps = Task::kMaxEpisodeSteps;
  if constexpr (kContinuous<Task>) {
    spec.action_kind = ActionKind::Continuous;
    spec.action_count = Task::kActionDims;
    spec.action_low = -Task::kMaxTorque;
    spec.action_high = Task::kMaxTorque;
  } else {
    spec.action_kind = ActionKind::Discrete;
    spec.action_count = Task::kActions;
    spec.reward_threshold = Task::kRewardThreshold;
  }
  return spec;
}

template <typename Task>
class ClassicControlEnv final : public VectorEnv {
 public:
  ClassicControlEnv(std::string id, int64_t copies)
      : VectorEnv(spec_of<Task>(std::move(id)), copies, Task::kStateSize) {}

 private:
  void reset_copy(double* state, RandomStream& stream) const override {
    Task::reset(state, [&](double low, double high) { return uniform_double(stream, low, high); });
  }
  StepOutcome step_copy(double* state, const int32_t* discrete,
                        const float* continuous) const override {
    classic::StepOutcome outcome;
    if constexpr (kContinuous<Task>)
      outcome = Task::step(state, *continuous);
    else
      outcome = Task::step(state, *discrete);
    return {outcome.reward, outcome.terminated};
  }
  void observe_copy(const double* state, float* observation) const override {
    Task::observe(state, observation);
  }
};

template <typename Task>
std::unique_ptr<VectorEnv> make(std::string_view id, int64_t copies) {
  return std::make_unique<ClassicControlEnv<Task>>(std::string(id), copies);
}

}  // namespace

std::vector<std::string> classic_control_ids() {
  return {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1"};
}

std::unique_ptr<VectorEnv> make_classic_control(std::string_view id, int64_t copies) {
  if (id == "CartPole-v1") return make<classic::CartPole>(id, copies);
  if (id == "Acrobot-v1") return make<classic::Acrobot>(id, copies);
  if (id == "MountainCar-v0") return make<classic::MountainCar>(id, copies);
  if (id == "Pendulum-v1") return make<classic::Pendulum>(id, copies);
  return nullptr;
}

}  // namespace hg::rl
