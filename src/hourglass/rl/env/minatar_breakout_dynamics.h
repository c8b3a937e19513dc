// MinAtar's Breakout (Young and Tian, 2019; minatar/environments/breakout.py) as gymnax's
// Breakout-MinAtar plays it, the pixel task PureJaxRL and gymnax-blines train on: a paddle on
// the bottom row of a 10x10 grid bounces a ball, which moves along diagonals, into three rows of
// bricks; +1 per brick broken; a cleared wall is rebuilt when the ball next comes down; the
// episode ends when the ball passes the paddle, or after 1,000 steps (truncation). gymnax's
// minimal action set (0: stay, 1: left, 2: right) and no sticky actions.
//
// The state is integers kept as doubles (exact): the ball's row, column and direction (0: up
// left, 1: up right, 2: down right, 3: down left), the paddle's column, whether the last step
// struck a brick, the ball's previous row and column, then the 10x10 brick map. The
// observation is 10x10x4 floats, row-major with the channel last (paddle, ball, trail, brick),
// as MinAtar and gymnax give it (and as hourglass's NHWC convolutions read it).
#pragma once

#include "hourglass/rl/env/classic_control_dynamics.h"

namespace hg::rl::minatar {

struct Breakout {
  static constexpr int kSize = 10;
  static constexpr int kChannels = 4;
  static constexpr int kStateSize = 7 + kSize * kSize;
  static constexpr int kObservationSize = kSize * kSize * kChannels;
  static constexpr int kActions = 3;
  static constexpr int kMaxEpisodeSteps = 1000;
  enum Field { kBallY, kBallX, kBallDir, kPaddle, kStrike, kLastY, kLastX, kBricks };

  static void fill_brick_rows(double* s) {
    for (int y = 1; y <= 3; ++y)
      for (int x = 0; x < kSize; ++x) s[kBricks + y * kSize + x] = 1.0;
  }

  // A fresh episode: the ball in row 3 at the left edge moving down right, or at the right
  // edge moving down left (even odds); the paddle in column 4; bricks in rows 1 to 3.
  template <typename Uniform>
  static void reset(double* s, Uniform&& uniform) {
    const bool right = uniform(0.0, 1.0) >= 0.5;
    for (int i = 0; i < kStateSize; ++i) s[i] = 0.0;
    s[kBallY] = 3;
    s[kBallX] = right ? 9 : 0;
    s[kBallDir] = right ? 3 : 2;
    s[kPaddle] = 4;
    s[kLastY] = s[kBallY];
    s[kLastX] = s[kBallX];
    fill_brick_rows(s);
  }

  // A saved state: whole numbers in their ranges, bricks 0 or 1.
  static bool valid(const double* s) {
    auto whole_in = [](double v, int lo, int hi) {
      return v >= lo && v <= hi && v == std::floor(v);
    };
    if (!whole_in(s[kBallY], 0, 9) || !whole_in(s[kBallX], 0, 9) || !whole_in(s[kBallDir], 0, 3) ||
        !whole_in(s[kPaddle], 0, 9) || !whole_in(s[kStrike], 0, 1) || !whole_in(s[kLastY], 0, 9) ||
        !whole_in(s[kLastX], 0, 9))
      return false;
    for (int i = 0; i < kSize * kSize; ++i)
      if (!whole_in(s[kBricks + i], 0, 1)) return false;
    return true;
  }

  static classic::StepOutcome step(double* s, int action) {
    static constexpr int kFlipX[4] = {1, 0, 3, 2};     // off a side wall
    static constexpr int kFlipY[4] = {3, 2, 1, 0};     // off the top, a brick, the paddle's middle
    static constexpr int kFlipBoth[4] = {2, 3, 0, 1};  // off the paddle's edge
    int ball_y = int(s[kBallY]), ball_x = int(s[kBallX]), dir = int(s[kBallDir]);
    int pos = int(s[kPaddle]);
    bool strike = s[kStrike] != 0.0;
    double* bricks = s + kBricks;
    if (action == 1) pos = pos - 1 < 0 ? 0 : pos - 1;
    if (action == 2) pos = pos + 1 > 9 ? 9 : pos + 1;
    const int last_x = ball_x, last_y = ball_y;
    int new_x = ball_x + (dir == 1 || dir == 2 ? 1 : -1);
    int new_y = ball_y + (dir == 2 || dir == 3 ? 1 : -1);
    double reward = 0.0;
    bool terminal = false, strike_toggle = false;
    if (new_x < 0 || new_x > 9) {
      new_x = new_x < 0 ? 0 : 9;
      dir = kFlipX[dir];
    }
    if (new_y < 0) {
      new_y = 0;
      dir = kFlipY[dir];
    } else if (bricks[new_y * kSize + new_x] == 1.0) {
      strike_toggle = true;
      if (!strike) {
        reward += 1.0;
        strike = true;
        bricks[new_y * kSize + new_x] = 0.0;
        new_y = last_y;
        dir = kFlipY[dir];
      }
    } else if (new_y == 9) {
      bool any = false;
      for (int i = 0; i < kSize * kSize; ++i) any = any || bricks[i] != 0.0;
      if (!any) fill_brick_rows(s);
      if (ball_x == pos) {
        dir = kFlipY[dir];
        new_y = last_y;
      } else if (new_x == pos) {
        dir = kFlipBoth[dir];
        new_y = last_y;
      } else {
        terminal = true;
      }
    }
    if (!strike_toggle) strike = false;
    s[kBallY] = new_y;
    s[kBallX] = new_x;
    s[kBallDir] = dir;
    s[kPaddle] = pos;
    s[kStrike] = strike ? 1.0 : 0.0;
    s[kLastY] = last_y;
    s[kLastX] = last_x;
    return {reward, terminal};
  }

  static void observe(const double* s, float* obs) {
    for (int i = 0; i < kObservationSize; ++i) obs[i] = 0.0f;
    auto at = [&](int y, int x, int c) -> float& { return obs[(y * kSize + x) * kChannels + c]; };
    at(9, int(s[kPaddle]), 0) = 1.0f;
    at(int(s[kBallY]), int(s[kBallX]), 1) = 1.0f;
    at(int(s[kLastY]), int(s[kLastX]), 2) = 1.0f;
    for (int y = 0; y < kSize; ++y)
      for (int x = 0; x < kSize; ++x) at(y, x, 3) = float(s[kBricks + y * kSize + x]);
  }
};

}  // namespace hg::rl::minatar
