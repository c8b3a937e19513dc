// The classic-control vector environments against Gymnasium's equations: a plain transcription
// of each task's step from gymnasium/envs/classic_control/*.py (written here line by line as
// the Python reads, apart from the library's code) stepped beside N copies, hand-worked first
// steps, the termination and truncation rules at their edges, the automatic reset, the reset
// distributions, and a saved state continuing bit-identically.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/rng.h"
#include "hourglass/rl/env/vector_env.h"
#include "support/expect_error.h"

namespace hg::rl {
namespace {

using State = std::vector<double>;

// NumPy's x ** 2 and np.square of a float64: x * x.
double sq(double x) { return x * x; }

// ---- Gymnasium's steps, transcribed (one copy, float64) ----

struct RefOutcome {
  double reward;
  bool terminated;
};

RefOutcome ref_cartpole(State& s, int action) {
  const double gravity = 9.8, masscart = 1.0, masspole = 0.1;
  const double total_mass = masspole + masscart, length = 0.5;
  const double polemass_length = masspole * length, force_mag = 10.0, tau = 0.02;
  const double theta_threshold_radians = 12 * 2 * M_PI / 360, x_threshold = 2.4;
  double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
  const double force = action == 1 ? force_mag : -force_mag;
  const double costheta = std::cos(theta), sintheta = std::sin(theta);
  const double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
  const double thetaacc = (gravity * sintheta - costheta * temp) /
                          (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
  const double xacc = temp - polemass_length * thetaacc * costheta / total_mass;
  x = x + tau * x_dot;
  x_dot = x_dot + tau * xacc;
  theta = theta + tau * theta_dot;
  theta_dot = theta_dot + tau * thetaacc;
  s = {x, x_dot, theta, theta_dot};
  const bool terminated = x < -x_threshold || x > x_threshold || theta < -theta_threshold_radians ||
                          theta > theta_threshold_radians;
  return {1.0, terminated};
}

std::array<double, 5> acrobot_dsdt(const std::array<double, 5>& s_augmented) {
  const double m1 = 1.0, m2 = 1.0, l1 = 1.0, lc1 = 0.5, lc2 = 0.5, I1 = 1.0, I2 = 1.0, g = 9.8;
  const double a = s_augmented[4];
  const double theta1 = s_augmented[0], theta2 = s_augmented[1];
  const double dtheta1 = s_augmented[2], dtheta2 = s_augmented[3];
  const double d1 =
      m1 * sq(lc1) + m2 * (sq(l1) + sq(lc2) + 2 * l1 * lc2 * std::cos(theta2)) + I1 + I2;
  const double d2 = m2 * (sq(lc2) + l1 * lc2 * std::cos(theta2)) + I2;
  const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - M_PI / 2.0);
  const double phi1 = -m2 * l1 * lc2 * sq(dtheta2) * std::sin(theta2) -
                      2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - M_PI / 2) + phi2;
  const double ddtheta2 =
      (a + d2 / d1 * phi1 - m2 * l1 * lc2 * sq(dtheta1) * std::sin(theta2) - phi2) /
      (m2 * sq(lc2) + I2 - sq(d2) / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  return {dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0};
}

double wrap(double x, double m, double M) {
  const double diff = M - m;
  while (x > M) x = x - diff;
  while (x < m) x = x + diff;
  return x;
}

RefOutcome ref_acrobot(State& s, int a) {
  const double avail_torque[3] = {-1.0, 0.0, +1};
  std::array<double, 5> y0 = {s[0], s[1], s[2], s[3], avail_torque[a]};
  // rk4(derivs, y0, [0, dt]): one step of dt = 0.2.
  const double dt = 0.2 - 0.0, dt2 = dt / 2.0;
  auto plus = [](const std::array<double, 5>& y, double h, const std::array<double, 5>& k) {
    std::array<double, 5> r;
    for (int i = 0; i < 5; ++i) r[i] = y[i] + h * k[i];
    return r;
  };
  const auto k1 = acrobot_dsdt(y0);
  const auto k2 = acrobot_dsdt(plus(y0, dt2, k1));
  const auto k3 = acrobot_dsdt(plus(y0, dt2, k2));
  const auto k4 = acrobot_dsdt(plus(y0, dt, k3));
  std::array<double, 4> ns;
  for (int i = 0; i < 4; ++i) ns[i] = y0[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  ns[0] = wrap(ns[0], -M_PI, M_PI);
  ns[1] = wrap(ns[1], -M_PI, M_PI);
  ns[2] = std::min(std::max(ns[2], -4 * M_PI), 4 * M_PI);
  ns[3] = std::min(std::max(ns[3], -9 * M_PI), 9 * M_PI);
  s = {ns[0], ns[1], ns[2], ns[3]};
  const bool terminated = -std::cos(s[0]) - std::cos(s[1] + s[0]) > 1.0;
  return {terminated ? 0.0 : -1.0, terminated};
}

RefOutcome ref_mountain_car(State& s, int action) {
  const double min_position = -1.2, max_position = 0.6, max_speed = 0.07;
  const double goal_position = 0.5, goal_velocity = 0, force = 0.001, gravity = 0.0025;
  double position = s[0], velocity = s[1];
  velocity += (action - 1) * force + std::cos(3 * position) * (-gravity);
  velocity = std::min(std::max(velocity, -max_speed), max_speed);
  position += velocity;
  position = std::min(std::max(position, min_position), max_position);
  if (position == min_position && velocity < 0) velocity = 0;
  s = {position, velocity};
  return {-1.0, position >= goal_position && velocity >= goal_velocity};
}

double angle_normalize(double x) {
  // Python's % takes the divisor's sign.
  double r = std::fmod(x + M_PI, 2 * M_PI);
  if (r < 0) r += 2 * M_PI;
  return r - M_PI;
}

RefOutcome ref_pendulum(State& s, float action) {
  const double max_speed = 8, max_torque = 2.0, dt = 0.05, g = 10.0, m = 1.0, l = 1.0;
  const double th = s[0], thdot = s[1];
  const double u = std::min(std::max(double(action), -max_torque), max_torque);
  const double costs = sq(angle_normalize(th)) + 0.1 * sq(thdot) + 0.001 * sq(u);
  double newthdot = thdot + (3 * g / (2 * l) * std::sin(th) + 3.0 / (m * sq(l)) * u) * dt;
  newthdot = std::min(std::max(newthdot, -max_speed), max_speed);
  const double newth = th + newthdot * dt;
  s = {newth, newthdot};
  return {-costs, false};
}

std::vector<float> ref_observe(const std::string& id, const State& s) {
  if (id == "Acrobot-v1")
    return {float(std::cos(s[0])), float(std::sin(s[0])), float(std::cos(s[1])),
            float(std::sin(s[1])), float(s[2]),           float(s[3])};
  if (id == "Pendulum-v1") return {float(std::cos(s[0])), float(std::sin(s[0])), float(s[1])};
  std::vector<float> obs;
  for (double v : s) obs.push_back(float(v));
  return obs;
}

RefOutcome ref_step(const std::string& id, State& s, int discrete, float continuous) {
  if (id == "CartPole-v1") return ref_cartpole(s, discrete);
  if (id == "Acrobot-v1") return ref_acrobot(s, discrete);
  if (id == "MountainCar-v0") return ref_mountain_car(s, discrete);
  return ref_pendulum(s, continuous);
}

int64_t state_size(const std::string& id) {
  return id == "CartPole-v1" || id == "Acrobot-v1" ? 4 : 2;
}

// Steps `copies` copies for `steps` steps with actions from a fixed stream (continuous ones
// partly outside the bounds, to exercise the clipping) and checks every copy's reward, flags
// and observations, and the state after each step, against the transcription. An episode's
// end is checked through final_observations; the reference then takes the new episode's state
// from the environment.
void check_against_reference(const std::string& id, int64_t copies, int steps,
                             const std::function<void(VectorEnvState&)>& start = {}) {
  auto env = make_vector_env(id, copies);
  env->reset(7);
  if (start) {
    VectorEnvState st = env->state();
    start(st);
    env->restore(st);
  }
  const int64_t n = state_size(id), obs_size = env->spec().observation_size;
  std::vector<State> ref(static_cast<size_t>(copies), State{});
  std::vector<int64_t> ref_steps = env->state().steps;
  {
    const VectorEnvState st = env->state();
    for (int64_t i = 0; i < copies; ++i)
      ref[size_t(i)].assign(st.physics.begin() + i * n, st.physics.begin() + (i + 1) * n);
  }
  RandomStream actions_stream(99, 0);
  int64_t ends = 0;
  for (int t = 0; t < steps; ++t) {
    std::vector<int32_t> discrete(static_cast<size_t>(copies));
    std::vector<float> continuous(static_cast<size_t>(copies));
    for (int64_t i = 0; i < copies; ++i) {
      discrete[size_t(i)] = int32_t(actions_stream.below(uint64_t(env->spec().action_count)));
      continuous[size_t(i)] = float(uniform_double(actions_stream, -3.0, 3.0));
    }
    if (env->spec().action_kind == ActionKind::Discrete)
      env->step(std::span<const int32_t>(discrete));
    else
      env->step(std::span<const float>(continuous));
    const VectorEnvState st = env->state();
    for (int64_t i = 0; i < copies; ++i) {
      const auto c = size_t(i);
      const RefOutcome out = ref_step(id, ref[c], discrete[c], continuous[c]);
      ++ref_steps[c];
      const bool truncated = ref_steps[c] >= env->spec().max_episode_steps;
      ASSERT_EQ(env->rewards()[c], float(out.reward)) << id << " copy " << i << " step " << t;
      ASSERT_EQ(bool(env->terminated()[c]), out.terminated) << id << " copy " << i << " step " << t;
      ASSERT_EQ(bool(env->truncated()[c]), truncated) << id << " copy " << i << " step " << t;
      const std::vector<float> expected = ref_observe(id, ref[c]);
      const bool ended = out.terminated || truncated;
      const float* got =
          (ended ? env->final_observations() : env->observations()).data() + i * obs_size;
      for (int64_t k = 0; k < obs_size; ++k)
        ASSERT_EQ(got[k], expected[size_t(k)])
            << id << " copy " << i << " step " << t << " [" << k << "]";
      if (ended) {
        ++ends;
        EXPECT_EQ(env->episode_lengths()[c], ref_steps[c]);
        ref[c].assign(st.physics.begin() + i * n, st.physics.begin() + (i + 1) * n);
        ref_steps[c] = 0;
        EXPECT_EQ(st.steps[c], 0);
      } else {
        for (int64_t k = 0; k < n; ++k)
          ASSERT_EQ(st.physics[c * size_t(n) + size_t(k)], ref[c][size_t(k)])
              << id << " copy " << i << " step " << t;
      }
    }
  }
  if (steps >= 600) EXPECT_GT(ends, 0) << id << ": no episode ended in " << steps << " steps";
}

TEST(ClassicControl, CartPoleMatchesGymnasiumsEquations) {
  check_against_reference("CartPole-v1", 7, 700);
}

TEST(ClassicControl, AcrobotMatchesGymnasiumsEquations) {
  check_against_reference("Acrobot-v1", 5, 600);
  // Fast swings: the velocity bounds and the angle wrapping take part.
  check_against_reference("Acrobot-v1", 3, 100, [](VectorEnvState& st) {
    for (size_t i = 0; i < 3; ++i) {
      st.physics[4 * i + 0] = 3.0;
      st.physics[4 * i + 2] = 12.0;
      st.physics[4 * i + 3] = -27.0;
    }
  });
}

TEST(ClassicControl, MountainCarMatchesGymnasiumsEquations) {
  check_against_reference("MountainCar-v0", 5, 600);
  // At the left wall moving left: the wall stops the car.
  check_against_reference("MountainCar-v0", 2, 50, [](VectorEnvState& st) {
    st.physics = {-1.19, -0.07, -1.2, -0.05};
  });
}

TEST(ClassicControl, PendulumMatchesGymnasiumsEquations) {
  check_against_reference("Pendulum-v1", 5, 600);
}

// The first CartPole step from rest, pushed right, worked by hand: temp = 10 / 1.1,
// thetaacc = -temp / (0.5 (4/3 - 0.1/1.1)) = -600/41, xacc = temp - 0.05 thetaacc / 1.1 = 400/41.
TEST(ClassicControl, CartPoleFirstStepByHand) {
  auto env = make_vector_env("CartPole-v1", 1);
  env->reset(1);
  VectorEnvState st = env->state();
  st.physics = {0, 0, 0, 0};
  env->restore(st);
  env->step(std::span<const int32_t>(std::vector<int32_t>{1}));
  const VectorEnvState after = env->state();
  EXPECT_NEAR(after.physics[0], 0.0, 1e-15);
  EXPECT_NEAR(after.physics[1], 0.02 * 400.0 / 41.0, 1e-15);
  EXPECT_NEAR(after.physics[2], 0.0, 1e-15);
  EXPECT_NEAR(after.physics[3], -0.02 * 600.0 / 41.0, 1e-15);
  EXPECT_EQ(env->rewards()[0], 1.0f);
  EXPECT_FALSE(env->terminated()[0]);
}

// Pendulum at 90 degrees, at rest, full torque: reward -(pi/2)^2 - 0.001 * 4; the velocity
// becomes (15 sin(pi/2) + 3 * 2) * 0.05 = 1.05.
TEST(ClassicControl, PendulumStepByHand) {
  auto env = make_vector_env("Pendulum-v1", 1);
  env->reset(1);
  VectorEnvState st = env->state();
  st.physics = {M_PI / 2, 0.0};
  env->restore(st);
  env->step(std::span<const float>(std::vector<float>{5.0f}));  // clipped to 2
  EXPECT_NEAR(env->rewards()[0], -(M_PI * M_PI / 4 + 0.004), 1e-6);
  const VectorEnvState after = env->state();
  EXPECT_NEAR(after.physics[1], 1.05, 1e-12);
  EXPECT_NEAR(after.physics[0], M_PI / 2 + 1.05 * 0.05, 1e-12);
  EXPECT_FALSE(env->terminated()[0]);
}

// CartPole terminates on the step that carries x past 2.4 (reward 1 on that step too), and the
// copy starts a new episode in the same step.
TEST(ClassicControl, CartPoleTerminatesAtTheEdgeAndResets) {
  auto env = make_vector_env("CartPole-v1", 2);
  env->reset(3);
  VectorEnvState st = env->state();
  st.physics = {2.399, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  st.steps = {41, 41};
  st.returns = {41.0, 41.0};
  env->restore(st);
  env->step(std::span<const int32_t>(std::vector<int32_t>{1, 1}));
  EXPECT_TRUE(env->terminated()[0]);
  EXPECT_FALSE(env->truncated()[0]);
  EXPECT_FALSE(env->terminated()[1]);
  EXPECT_EQ(env->rewards()[0], 1.0f);
  EXPECT_EQ(env->episode_returns()[0], 42.0);
  EXPECT_EQ(env->episode_lengths()[0], 42);
  EXPECT_FLOAT_EQ(env->final_observations()[0], float(2.399 + 0.02));
  // The new episode's observation is a fresh reset's: every variable within 0.05.
  for (int k = 0; k < 4; ++k) EXPECT_LE(std::fabs(env->observations()[size_t(k)]), 0.05f);
  const VectorEnvState after = env->state();
  EXPECT_EQ(after.steps[0], 0);
  EXPECT_EQ(after.steps[1], 42);
  EXPECT_EQ(after.episodes[0], 2u);
  EXPECT_EQ(after.episodes[1], 1u);
}

// The time limit: the 500th CartPole step truncates (Gymnasium's TimeLimit), the 200th of
// Pendulum and MountainCar; Pendulum never terminates.
TEST(ClassicControl, TimeLimitsTruncate) {
  for (const char* id : {"CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"}) {
    auto env = make_vector_env(id, 1);
    env->reset(5);
    const int64_t limit = env->spec().max_episode_steps;
    VectorEnvState st = env->state();
    st.steps = {limit - 2};
    env->restore(st);
    const bool discrete = env->spec().action_kind == ActionKind::Discrete;
    auto step = [&] {
      if (discrete)
        env->step(std::span<const int32_t>(std::vector<int32_t>{0}));
      else
        env->step(std::span<const float>(std::vector<float>{0.0f}));
    };
    step();
    ASSERT_FALSE(env->truncated()[0]) << id;
    if (env->terminated()[0]) continue;  // ended on its own first (not for these states)
    step();
    EXPECT_TRUE(env->truncated()[0]) << id;
    EXPECT_EQ(env->episode_lengths()[0], limit) << id;
    EXPECT_EQ(env->state().steps[0], 0) << id;
  }
  EXPECT_EQ(make_vector_env("CartPole-v1", 1)->spec().max_episode_steps, 500);
  EXPECT_EQ(make_vector_env("Acrobot-v1", 1)->spec().max_episode_steps, 500);
  EXPECT_EQ(make_vector_env("MountainCar-v0", 1)->spec().max_episode_steps, 200);
  EXPECT_EQ(make_vector_env("Pendulum-v1", 1)->spec().max_episode_steps, 200);
}

// MountainCar ends when the car reaches 0.5 with non-negative velocity.
TEST(ClassicControl, MountainCarReachesTheGoal) {
  auto env = make_vector_env("MountainCar-v0", 1);
  env->reset(5);
  VectorEnvState st = env->state();
  st.physics = {0.49, 0.06};
  env->restore(st);
  env->step(std::span<const int32_t>(std::vector<int32_t>{2}));
  EXPECT_TRUE(env->terminated()[0]);
  EXPECT_EQ(env->rewards()[0], -1.0f);
  EXPECT_GE(env->final_observations()[0], 0.5f);
}

// Acrobot ends when the tip is a link's length above the pivot (-cos t1 - cos(t1 + t2) > 1),
// with reward 0 on that step: hanging straight up it ends at once.
TEST(ClassicControl, AcrobotEndsWithTheTipUp) {
  auto env = make_vector_env("Acrobot-v1", 1);
  env->reset(5);
  VectorEnvState st = env->state();
  st.physics = {M_PI - 0.01, 0.0, 0.0, 0.0};
  env->restore(st);
  env->step(std::span<const int32_t>(std::vector<int32_t>{1}));
  EXPECT_TRUE(env->terminated()[0]);
  EXPECT_EQ(env->rewards()[0], 0.0f);
}

// Resets fall in Gymnasium's ranges, differ between copies and seeds, repeat for a seed, and
// do not depend on the thread count. Acrobot's are float32 values, as Gymnasium keeps them.
TEST(ClassicControl, ResetDistributions) {
  struct Range {
    const char* id;
    std::vector<std::pair<double, double>> bounds;
  };
  const std::vector<Range> ranges = {
      {"CartPole-v1", {{-0.05, 0.05}, {-0.05, 0.05}, {-0.05, 0.05}, {-0.05, 0.05}}},
      {"Acrobot-v1", {{-0.1, 0.1}, {-0.1, 0.1}, {-0.1, 0.1}, {-0.1, 0.1}}},
      {"MountainCar-v0", {{-0.6, -0.4}, {0.0, 0.0}}},
      {"Pendulum-v1", {{-M_PI, M_PI}, {-1.0, 1.0}}}};
  const int64_t copies = 2000;
  for (const Range& r : ranges) {
    auto env = make_vector_env(r.id, copies);
    env->reset(11);
    const VectorEnvState a = env->state();
    const size_t n = r.bounds.size();
    std::vector<double> mean(n, 0.0);
    for (int64_t i = 0; i < copies; ++i)
      for (size_t k = 0; k < n; ++k) {
        const double v = a.physics[size_t(i) * n + k];
        ASSERT_GE(v, r.bounds[k].first - 1e-7) << r.id;
        ASSERT_LE(v, r.bounds[k].second + 1e-7) << r.id;
        if (std::string(r.id) == "Acrobot-v1") ASSERT_EQ(v, double(float(v)));
        mean[k] += v / double(copies);
      }
    // Uniform draws: the mean within 5 standard errors of the middle.
    for (size_t k = 0; k < n; ++k) {
      const double width = r.bounds[k].second - r.bounds[k].first;
      const double middle = (r.bounds[k].first + r.bounds[k].second) / 2;
      EXPECT_NEAR(mean[k], middle, 5 * width / std::sqrt(12.0 * copies) + 1e-12) << r.id;
    }
    EXPECT_NE(a.physics[0], a.physics[n]) << r.id;
    env->reset(12);
    EXPECT_NE(env->state().physics, a.physics) << r.id;
    const int threads = num_threads();
    set_num_threads(1);
    env->reset(11);
    set_num_threads(threads);
    EXPECT_EQ(env->state().physics, a.physics) << r.id;
  }
}

// Random play: CartPole episodes under a uniformly random policy last about 22 steps (the
// known figure for this task); MountainCar's never reach the goal within 200 steps.
TEST(ClassicControl, RandomPolicyEpisodes) {
  auto cartpole = make_vector_env("CartPole-v1", 64);
  cartpole->reset(21);
  RandomStream rng(5, 5);
  std::vector<int32_t> actions(64);
  double total = 0;
  int64_t episodes = 0;
  for (int t = 0; t < 600; ++t) {
    for (auto& a : actions) a = int32_t(rng.below(2));
    cartpole->step(std::span<const int32_t>(actions));
    for (size_t i = 0; i < 64; ++i)
      if (cartpole->terminated()[i] || cartpole->truncated()[i]) {
        total += double(cartpole->episode_lengths()[i]);
        ++episodes;
        EXPECT_EQ(cartpole->episode_returns()[i], double(cartpole->episode_lengths()[i]));
      }
  }
  ASSERT_GT(episodes, 1000);
  EXPECT_NEAR(total / double(episodes), 22.3, 1.5);

  auto car = make_vector_env("MountainCar-v0", 16);
  car->reset(21);
  std::vector<int32_t> car_actions(16);
  for (int t = 0; t < 200; ++t) {
    for (auto& a : car_actions) a = int32_t(rng.below(3));
    car->step(std::span<const int32_t>(car_actions));
  }
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_TRUE(car->truncated()[i]);
    EXPECT_FALSE(car->terminated()[i]);
    EXPECT_EQ(car->episode_returns()[i], -200.0);
  }
}

// A saved state continues exactly as the environment it was saved from.
TEST(ClassicControl, SavedStateContinuesBitIdentically) {
  for (const std::string& id : vector_env_ids()) {
    auto a = make_vector_env(id, 9);
    auto b = make_vector_env(id, 9);
    a->reset(77);
    RandomStream rng(3, 3);
    auto step = [&](VectorEnv& env, int t) {
      RandomStream r(8, uint64_t(t));
      if (env.spec().action_kind == ActionKind::Discrete) {
        std::vector<int32_t> act(9);
        for (auto& x : act) x = int32_t(r.below(uint64_t(env.spec().action_count)));
        env.step(std::span<const int32_t>(act));
      } else {
        std::vector<float> act(9);
        for (auto& x : act) x = float(uniform_double(r, -2, 2));
        env.step(std::span<const float>(act));
      }
    };
    for (int t = 0; t < 250; ++t) step(*a, t);
    b->restore(a->state());
    for (size_t k = 0; k < a->observations().size(); ++k)
      ASSERT_EQ(a->observations()[k], b->observations()[k]) << id;
    for (int t = 250; t < 900; ++t) {
      step(*a, t);
      step(*b, t);
    }
    const VectorEnvState sa = a->state(), sb = b->state();
    EXPECT_EQ(sa.physics, sb.physics) << id;
    EXPECT_EQ(sa.episodes, sb.episodes) << id;
    EXPECT_EQ(sa.returns, sb.returns) << id;
    EXPECT_GT(sa.episodes[0], 1u) << id;
  }
}

TEST(ClassicControl, BadInputIsRefusedByName) {
  auto expect_error = [](const std::function<void()>& fn, const std::string& part) {
    test::expect_invalid(fn, {part});
  };
  expect_error([] { make_vector_env("CartPole-v0", 1); }, "CartPole-v1, Acrobot-v1");
  expect_error([] { make_vector_env("CartPole-v1", 0); }, "copies must be positive");
  auto cartpole = make_vector_env("CartPole-v1", 2);
  expect_error(
      [&] {
        cartpole->step(std::span<const int32_t>(std::vector<int32_t>{0, 1}));
      },
      "before reset()");
  cartpole->reset(1);
  expect_error(
      [&] {
        cartpole->step(std::span<const int32_t>(std::vector<int32_t>{0, 2}));
      },
      "copy 1's action 2 is out of range");
  expect_error([&] { cartpole->step(std::span<const int32_t>(std::vector<int32_t>{0})); },
               "1 action(s) for 2 copies");
  expect_error(
      [&] {
        cartpole->step(std::span<const float>(std::vector<float>{0, 0}));
      },
      "not continuous values");
  auto pendulum = make_vector_env("Pendulum-v1", 2);
  pendulum->reset(1);
  expect_error(
      [&] {
        pendulum->step(std::span<const float>(std::vector<float>{0, NAN}));
      },
      "copy 1's action is NaN");
  expect_error([&] { pendulum->restore(cartpole->state()); }, "is of CartPole-v1");
  auto three = make_vector_env("CartPole-v1", 3);
  three->reset(1);
  expect_error([&] { cartpole->restore(three->state()); }, "holds 3 copies");
}

}  // namespace
}  // namespace hg::rl
