// N copies of one environment stepped as one batch: the interface an agent's rollout sees.
//
// Automatic reset in the same step: a copy whose episode ends (terminated, or truncated by the
// time limit) starts its next episode at once, so after every step each row of observations()
// is the observation the agent acts on next; the ended episode's last observation is in that
// row of final_observations(), and its return and length in episode_returns() and
// episode_lengths(). (Gymnasium 1.x's vector environments reset on the next step instead;
// CleanRL's SyncVectorEnv of gym 0.23 and gymnax reset in the same step, as here.)
//
// Randomness comes only from the seed given to reset(): copy i's e-th episode starts from the
// Philox stream (seed, mix_stream(i, e)), so the copies are independent of one another, of the
// thread count and of how the copies are split, and state() (the physical variables, step and
// episode counters, running returns) is all a checkpoint needs to continue bit-identically.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/base/rng.h"

namespace hg::rl {

enum class ActionKind { Discrete, Continuous };

// What an environment is: its id, observation and action shapes, time limit.
struct EnvSpec {
  std::string id;                // Gymnasium's id, e.g. "CartPole-v1"
  int64_t observation_size = 0;  // floats per observation
  ActionKind action_kind = ActionKind::Discrete;
  // Discrete: the number of actions (0 .. count-1); Continuous: the dimensions of an action.
  int64_t action_count = 0;
  // Continuous: each dimension is clipped to [action_low, action_high] before it acts.
  double action_low = 0, action_high = 0;
  int64_t max_episode_steps = 0;  // the time limit: a step that reaches it truncates
  // Gymnasium's level at which the task counts as solved (mean return), where it has one.
  std::optional<double> reward_threshold;
};

// Everything a vector environment needs to continue exactly where it was (a checkpoint's
// part): which copy is where, as the environment's own numbers.
struct VectorEnvState {
  std::string id;
  uint64_t seed = 0;
  std::vector<double> physics;     // [copies, state size]: each copy's physical variables
  std::vector<int64_t> steps;      // [copies]: steps taken in the current episode
  std::vector<uint64_t> episodes;  // [copies]: episodes started (the reset stream's index)
  std::vector<double> returns;     // [copies]: the current episode's summed reward
};

class VectorEnv {
 public:
  virtual ~VectorEnv() = default;
  VectorEnv(const VectorEnv&) = delete;
  VectorEnv& operator=(const VectorEnv&) = delete;

  const EnvSpec& spec() const { return spec_; }
  int64_t copies() const { return copies_; }

  // Starts every copy's first episode from `seed`.
  void reset(uint64_t seed);
  // Steps every copy: a discrete environment takes one action index per copy, a continuous one
  // action_count floats per copy (row-major). A wrong count, an index out of range or a NaN
  // is refused naming the copy.
  void step(std::span<const int32_t> actions);
  void step(std::span<const float> actions);

  // [copies, observation_size]: what the agent acts on next (after reset() or step()).
  std::span<const float> observations() const { return observations_; }
  // Of the last step, per copy:
  std::span<const float> rewards() const { return rewards_; }
  std::span<const uint8_t> terminated() const { return terminated_; }
  std::span<const uint8_t> truncated() const { return truncated_; }
  // Rows of copies whose episode ended at the last step: its last observation, its return and
  // length (other rows hold what an earlier end left there).
  std::span<const float> final_observations() const { return final_observations_; }
  std::span<const double> episode_returns() const { return episode_returns_; }
  std::span<const int64_t> episode_lengths() const { return episode_lengths_; }

  VectorEnvState state() const;
  // Continues from `state` (state() of an environment with the same id and number of copies;
  // anything else is refused naming what differs).
  void restore(const VectorEnvState& state);

 protected:
  VectorEnv(EnvSpec spec, int64_t copies, int64_t state_size);

  // One copy's part, implemented per task: a fresh episode's state drawn from `stream` (the
  // copy's stream for this episode); one step (reward, terminated); the observation of a state.
  struct StepOutcome {
    double reward;
    bool terminated;
  };
  virtual void reset_copy(double* state, RandomStream& stream) const = 0;
  virtual StepOutcome step_copy(double* state, const int32_t* discrete,
                                const float* continuous) const = 0;
  virtual void observe_copy(const double* state, float* observation) const = 0;
  // Whether a saved copy's state is one the task can be in (restore() refuses others).
  virtual bool valid_copy(const double* state) const = 0;

 private:
  void start_episode(int64_t copy);
  void step_all(const int32_t* discrete, const float* continuous);
  void check_started(const char* what) const;

  EnvSpec spec_;
  int64_t copies_;
  int64_t state_size_;
  bool started_ = false;
  uint64_t seed_ = 0;
  std::vector<double> physics_;
  std::vector<int64_t> steps_;
  std::vector<uint64_t> episodes_;
  std::vector<double> returns_;
  std::vector<float> observations_, rewards_, final_observations_;
  std::vector<uint8_t> terminated_, truncated_;
  std::vector<double> episode_returns_;
  std::vector<int64_t> episode_lengths_;
};

// A uniform double in [low, high) from the stream's next 53 bits (what a task's reset draws).
double uniform_double(RandomStream& stream, double low, double high);

// The environments hourglass has, by Gymnasium id.
std::vector<std::string> vector_env_ids();
// `copies` copies of the environment `id` (one of vector_env_ids(); anything else is refused
// naming the known ids), not yet reset.
std::unique_ptr<VectorEnv> make_vector_env(std::string_view id, int64_t copies);

}  // namespace hg::rl
