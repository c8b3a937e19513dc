// Breakout-MinAtar against gymnax's formulation (gymnax/environments/minatar/breakout.py:
// step_agent and step_ball_brick, every branch a select over conditions, transcribed here as
// written), which the library's branch-by-branch version (MinAtar's own structure) must match
// step for step; hand-made scenes for the brick, the paddle's middle and edge, the wall, the
// rebuilt wall and the missed ball; the observation's layout; saved states refused when out of
// range.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"
#include "hourglass/rl/env/vector_env.h"

namespace hg::rl {
namespace {

struct RefState {
  int ball_y, ball_x, ball_dir, pos;
  bool strike;
  int last_y, last_x;
  std::array<int, 100> brick_map;
};

RefState from_physics(const double* s) {
  RefState r{int(s[0]), int(s[1]), int(s[2]), int(s[3]), s[4] != 0, int(s[5]), int(s[6]), {}};
  for (int i = 0; i < 100; ++i) r.brick_map[size_t(i)] = int(s[7 + i]);
  return r;
}

int sel(bool c, int a, int b) { return c ? a : b; }

// gymnax's step_env for the minimal action set [0, 1, 3]: returns (reward, terminal).
std::pair<double, bool> ref_step(RefState& st, int action_index) {
  const int a = std::array<int, 3>{0, 1, 3}[size_t(action_index)];
  // step_agent
  const int pos = std::max(0, st.pos - 1) * (a == 1) + std::min(9, st.pos + 1) * (a == 3) +
                  st.pos * (a != 1 && a != 3);
  const int last_x = st.ball_x, last_y = st.ball_y;
  int new_x = (st.ball_x - 1) * (st.ball_dir == 0) + (st.ball_x + 1) * (st.ball_dir == 1) +
              (st.ball_x + 1) * (st.ball_dir == 2) + (st.ball_x - 1) * (st.ball_dir == 3);
  int new_y = (st.ball_y - 1) * (st.ball_dir == 0) + (st.ball_y - 1) * (st.ball_dir == 1) +
              (st.ball_y + 1) * (st.ball_dir == 2) + (st.ball_y + 1) * (st.ball_dir == 3);
  const bool border_cond_x = new_x < 0 || new_x > 9;
  new_x = sel(border_cond_x, 0 * (new_x < 0) + 9 * (new_x > 9), new_x);
  int ball_dir =
      sel(border_cond_x, std::array<int, 4>{1, 0, 3, 2}[size_t(st.ball_dir)], st.ball_dir);
  st.pos = pos;
  st.last_x = last_x;
  st.last_y = last_y;
  // step_ball_brick
  double reward = 0;
  const bool border_cond1_y = new_y < 0;
  new_y = sel(border_cond1_y, 0, new_y);
  ball_dir = sel(border_cond1_y, std::array<int, 4>{3, 2, 1, 0}[size_t(ball_dir)], ball_dir);
  const bool strike_toggle = !border_cond1_y && st.brick_map[size_t(new_y * 10 + new_x)] == 1;
  const bool strike_bool = !st.strike && strike_toggle;
  reward += strike_bool * 1.0;
  if (strike_bool) st.brick_map[size_t(new_y * 10 + new_x)] = 0;
  new_y = sel(strike_bool, st.last_y, new_y);
  ball_dir = sel(strike_bool, std::array<int, 4>{3, 2, 1, 0}[size_t(ball_dir)], ball_dir);
  const bool brick_cond = !strike_toggle && new_y == 9;
  int count = 0;
  for (int v : st.brick_map) count += v != 0;
  const bool spawn_bricks = brick_cond && count == 0;
  if (spawn_bricks)
    for (int i = 10; i < 40; ++i) st.brick_map[size_t(i)] = 1;
  const bool redirect_ball1 = brick_cond && st.ball_x == st.pos;
  ball_dir = sel(redirect_ball1, std::array<int, 4>{3, 2, 1, 0}[size_t(ball_dir)], ball_dir);
  new_y = sel(redirect_ball1, st.last_y, new_y);
  const bool redirect_ball2 = brick_cond && !redirect_ball1 && new_x == st.pos;
  ball_dir = sel(redirect_ball2, std::array<int, 4>{2, 3, 0, 1}[size_t(ball_dir)], ball_dir);
  new_y = sel(redirect_ball2, st.last_y, new_y);
  const bool terminal = brick_cond && !redirect_ball1 && !redirect_ball2;
  st.strike = strike_toggle;
  st.ball_dir = ball_dir;
  st.ball_x = new_x;
  st.ball_y = new_y;
  return {reward, terminal};
}

// gymnax's get_obs.
std::vector<float> ref_obs(const RefState& st) {
  std::vector<float> obs(400, 0.0f);
  obs[size_t((9 * 10 + st.pos) * 4 + 0)] = 1;
  obs[size_t((st.ball_y * 10 + st.ball_x) * 4 + 1)] = 1;
  obs[size_t((st.last_y * 10 + st.last_x) * 4 + 2)] = 1;
  for (int i = 0; i < 100; ++i) obs[size_t(i * 4 + 3)] = float(st.brick_map[size_t(i)]);
  return obs;
}

std::vector<int32_t> actions_for(RandomStream& rng, int64_t copies) {
  std::vector<int32_t> a(static_cast<size_t>(copies));
  for (auto& x : a) x = int32_t(rng.below(3));
  return a;
}

// Random play over many episodes: rewards, ends and observations agree with gymnax's
// formulation at every step of every copy.
TEST(MinAtarBreakout, MatchesGymnaxsFormulation) {
  const int64_t copies = 16;
  auto env = make_vector_env("Breakout-MinAtar", copies);
  env->reset(4);
  std::vector<RefState> ref;
  {
    const VectorEnvState st = env->state();
    for (int64_t i = 0; i < copies; ++i) ref.push_back(from_physics(st.physics.data() + i * 107));
  }
  RandomStream rng(1, 2);
  int64_t ends = 0, bricks = 0;
  for (int t = 0; t < 3000; ++t) {
    const std::vector<int32_t> actions = actions_for(rng, copies);
    env->step(std::span<const int32_t>(actions));
    const VectorEnvState st = env->state();
    for (int64_t i = 0; i < copies; ++i) {
      const auto c = size_t(i);
      const auto [reward, terminal] = ref_step(ref[c], actions[c]);
      ASSERT_EQ(env->rewards()[c], float(reward)) << "copy " << i << " step " << t;
      ASSERT_EQ(bool(env->terminated()[c]), terminal) << "copy " << i << " step " << t;
      bricks += reward > 0;
      const std::vector<float> expected = ref_obs(ref[c]);
      const bool ended = env->terminated()[c] || env->truncated()[c];
      const float* got = (ended ? env->final_observations() : env->observations()).data() + i * 400;
      for (size_t k = 0; k < 400; ++k)
        ASSERT_EQ(got[k], expected[k]) << "copy " << i << " step " << t << " [" << k << "]";
      if (ended) {
        ++ends;
        ref[c] = from_physics(st.physics.data() + i * 107);
      }
    }
  }
  EXPECT_GT(ends, 100);
  EXPECT_GT(bricks, 100);
}

// A scene: the ball at (row, column) moving in `dir`, the paddle at `paddle`, bricks where
// `brick_rows` says (rows 1 to 3 full when true, none otherwise).
std::unique_ptr<VectorEnv> scene(int row, int col, int dir, int paddle, bool brick_rows) {
  auto env = make_vector_env("Breakout-MinAtar", 1);
  env->reset(1);
  VectorEnvState st = env->state();
  std::vector<double>& s = st.physics;
  std::fill(s.begin(), s.end(), 0.0);
  s[0] = row;
  s[1] = col;
  s[2] = dir;
  s[3] = paddle;
  s[5] = row;
  s[6] = col;
  if (brick_rows)
    for (int i = 10; i < 40; ++i) s[size_t(7 + i)] = 1.0;
  env->restore(st);
  return env;
}

void stay(VectorEnv& env) { env.step(std::span<const int32_t>(std::vector<int32_t>{0})); }

TEST(MinAtarBreakout, BrickBreaksAndTheBallBounces) {
  auto env = scene(4, 5, 0, 4, true);  // moving up left into row 3
  stay(*env);
  EXPECT_EQ(env->rewards()[0], 1.0f);
  const VectorEnvState st = env->state();
  EXPECT_EQ(st.physics[7 + 3 * 10 + 4], 0.0);  // the brick at (3, 4) is gone
  EXPECT_EQ(st.physics[0], 4);                 // back to its row
  EXPECT_EQ(st.physics[1], 4);
  EXPECT_EQ(st.physics[2], 3);  // now down left
  EXPECT_EQ(st.physics[4], 1);  // struck
}

TEST(MinAtarBreakout, PaddleMiddleAndEdgeAndMiss) {
  {  // Ball above the paddle coming down: straight back up.
    auto env = scene(8, 4, 2, 4, true);
    stay(*env);
    EXPECT_FALSE(env->terminated()[0]);
    EXPECT_EQ(env->state().physics[2], 1);  // down right -> up right
    EXPECT_EQ(env->state().physics[0], 8);
  }
  {  // Ball lands on the paddle's column from the side: flipped both ways.
    auto env = scene(8, 3, 2, 4, true);
    stay(*env);
    EXPECT_FALSE(env->terminated()[0]);
    EXPECT_EQ(env->state().physics[2], 0);  // down right -> up left
  }
  {  // Missed: the episode ends (the copy restarts), reward 0.
    auto env = scene(8, 1, 2, 6, true);
    stay(*env);
    EXPECT_TRUE(env->terminated()[0]);
    EXPECT_EQ(env->episode_lengths()[0], 1);
    EXPECT_EQ(env->state().physics[0], 3);  // the new episode's ball
  }
  {  // Moving the paddle left under the ball in time.
    auto env = scene(8, 3, 2, 4, true);
    env->step(std::span<const int32_t>(std::vector<int32_t>{1}));
    EXPECT_FALSE(env->terminated()[0]);
    EXPECT_EQ(env->state().physics[3], 3);
    EXPECT_EQ(env->state().physics[2], 1);  // off the middle: up right
  }
}

TEST(MinAtarBreakout, ClearedWallIsRebuiltWhenTheBallComesDown) {
  auto env = scene(8, 4, 2, 4, false);
  stay(*env);
  const VectorEnvState st = env->state();
  for (int i = 10; i < 40; ++i) EXPECT_EQ(st.physics[size_t(7 + i)], 1.0);
}

TEST(MinAtarBreakout, SideWallReflects) {
  auto env = scene(5, 9, 1, 4, true);  // up right at the right wall
  stay(*env);
  EXPECT_EQ(env->state().physics[1], 9);
  EXPECT_EQ(env->state().physics[2], 0);  // up left
}

TEST(MinAtarBreakout, ObservationLayoutAndTimeLimit) {
  auto env = make_vector_env("Breakout-MinAtar", 2);
  env->reset(9);
  EXPECT_EQ(env->spec().observation_size, 400);
  EXPECT_EQ(env->spec().action_count, 3);
  EXPECT_EQ(env->spec().max_episode_steps, 1000);
  const float* obs = env->observations().data();
  EXPECT_EQ(obs[(9 * 10 + 4) * 4 + 0], 1.0f);  // paddle at row 9, column 4
  const bool left = obs[(3 * 10 + 0) * 4 + 1] == 1.0f, right = obs[(3 * 10 + 9) * 4 + 1] == 1.0f;
  EXPECT_NE(left, right);  // the ball at one edge of row 3
  float bricks = 0;
  for (int i = 0; i < 100; ++i) bricks += obs[i * 4 + 3];
  EXPECT_EQ(bricks, 30.0f);
  // Both starts occur.
  auto many = make_vector_env("Breakout-MinAtar", 200);
  many->reset(3);
  int lefts = 0;
  for (int i = 0; i < 200; ++i)
    lefts += many->observations()[size_t(i * 400 + (30 + 0) * 4 + 1)] == 1.0f;
  EXPECT_GT(lefts, 60);
  EXPECT_LT(lefts, 140);
  // The 1,000th step truncates.
  VectorEnvState st = env->state();
  st.steps = {999, 0};
  env->restore(st);
  env->step(std::span<const int32_t>(std::vector<int32_t>{0, 0}));
  if (!env->terminated()[0]) {
    EXPECT_TRUE(env->truncated()[0]);
    EXPECT_EQ(env->episode_lengths()[0], 1000);
  }
  EXPECT_FALSE(env->truncated()[1]);
}

TEST(MinAtarBreakout, OutOfRangeSavedStateIsRefused) {
  auto env = make_vector_env("Breakout-MinAtar", 1);
  env->reset(1);
  for (const auto& [index, value] : std::vector<std::pair<size_t, double>>{
           {0, 10.0}, {1, -1.0}, {2, 4.0}, {3, 2.5}, {4, 2.0}, {50, 0.5}, {6, 1e300}}) {
    VectorEnvState st = env->state();
    st.physics[index] = value;
    try {
      env->restore(st);
      ADD_FAILURE() << "state value " << value << " at " << index << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a state of this environment"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace hg::rl
