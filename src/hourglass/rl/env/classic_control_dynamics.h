// The dynamics of Gymnasium's classic-control tasks (gymnasium/envs/classic_control/*.py):
// CartPole-v1, Acrobot-v1, MountainCar-v0 and Pendulum-v1, one step of one copy, in float64 as
// Gymnasium computes them. Each task is a struct with its constants, its state (the physical
// variables Gymnasium keeps in `self.state`), the reset distribution's bounds, the step and the
// observation. The time limit (truncation) and the automatic reset belong to the vector
// environment (vector_env.h), which runs N copies of one of these.
//
// Only <cmath>: a GPU kernel can step the same structs later.
#pragma once

#include <cmath>
#include <cstdint>

namespace hg::rl::classic {

// What one step gives: Gymnasium's reward and `terminated` (the task's own end, not the limit).
struct StepOutcome {
  double reward;
  bool terminated;
};

// CartPole-v1: a pole on a cart pushed left or right with 10 N; +1 per step until the pole
// leans past 12 degrees or the cart leaves [-2.4, 2.4]. Euler integration, tau = 0.02 s.
struct CartPole {
  static constexpr int kStateSize = 4;  // x, x_dot, theta, theta_dot
  static constexpr int kObservationSize = 4;
  static constexpr int kActions = 2;  // 0: push left, 1: push right
  static constexpr int kMaxEpisodeSteps = 500;
  static constexpr double kRewardThreshold = 475.0;
  static constexpr double kResetLow = -0.05, kResetHigh = 0.05;  // every variable

  static constexpr double kGravity = 9.8, kMassCart = 1.0, kMassPole = 0.1;
  static constexpr double kTotalMass = kMassPole + kMassCart;
  static constexpr double kLength = 0.5;  // half the pole's length
  static constexpr double kPoleMassLength = kMassPole * kLength;
  static constexpr double kForceMag = 10.0, kTau = 0.02;
  static constexpr double kThetaThreshold = 12 * 2 * M_PI / 360, kXThreshold = 2.4;

  // A fresh episode: every variable uniform in [-0.05, 0.05).
  template <typename Uniform>
  static void reset(double* s, Uniform&& uniform) {
    for (int i = 0; i < 4; ++i) s[i] = uniform(kResetLow, kResetHigh);
  }

  static StepOutcome step(double* s, int action) {
    const double x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
    const double force = action == 1 ? kForceMag : -kForceMag;
    const double cos_theta = std::cos(theta), sin_theta = std::sin(theta);
    const double temp =
        (force + kPoleMassLength * (theta_dot * theta_dot) * sin_theta) / kTotalMass;
    const double theta_acc =
        (kGravity * sin_theta - cos_theta * temp) /
        (kLength * (4.0 / 3.0 - kMassPole * (cos_theta * cos_theta) / kTotalMass));
    const double x_acc = temp - kPoleMassLength * theta_acc * cos_theta / kTotalMass;
    s[0] = x + kTau * x_dot;
    s[1] = x_dot + kTau * x_acc;
    s[2] = theta + kTau * theta_dot;
    s[3] = theta_dot + kTau * theta_acc;
    const bool terminated = s[0] < -kXThreshold || s[0] > kXThreshold || s[2] < -kThetaThreshold ||
                            s[2] > kThetaThreshold;
    return {1.0, terminated};
  }
  static void observe(const double* s, float* obs) {
    for (int i = 0; i < 4; ++i) obs[i] = float(s[i]);
  }
};

// Acrobot-v1: two links hanging from a pivot, torque -1, 0 or +1 on the joint between them;
// -1 per step until the free end swings one link's length above the pivot. Gymnasium's "book"
// dynamics (Sutton and Barto), integrated over dt = 0.2 s by one fourth-order Runge-Kutta step;
// angles wrapped to [-pi, pi], velocities bounded to 4 pi and 9 pi.
struct Acrobot {
  static constexpr int kStateSize = 4;        // theta1, theta2, dtheta1, dtheta2
  static constexpr int kObservationSize = 6;  // cos, sin of both angles; both velocities
  static constexpr int kActions = 3;          // torque -1, 0, +1
  static constexpr int kMaxEpisodeSteps = 500;
  static constexpr double kRewardThreshold = -100.0;
  static constexpr double kResetLow = -0.1, kResetHigh = 0.1;

  static constexpr double kDt = 0.2;
  static constexpr double kLinkLength1 = 1.0, kLinkMass1 = 1.0, kLinkMass2 = 1.0;
  static constexpr double kLinkCom1 = 0.5, kLinkCom2 = 0.5, kLinkMoment = 1.0;
  static constexpr double kMaxVel1 = 4 * M_PI, kMaxVel2 = 9 * M_PI;
  static constexpr double kGravity = 9.8;

  // A fresh episode: every variable uniform in [-0.1, 0.1), rounded to float32 as Gymnasium
  // keeps it (its steps are float64).
  template <typename Uniform>
  static void reset(double* s, Uniform&& uniform) {
    for (int i = 0; i < 4; ++i) s[i] = double(float(uniform(kResetLow, kResetHigh)));
  }

  // d(state)/dt under `torque` (Gymnasium's _dsdt; the torque's own derivative is 0).
  static void derivatives(const double* s, double torque, double* d) {
    const double m1 = kLinkMass1, m2 = kLinkMass2, l1 = kLinkLength1;
    const double lc1 = kLinkCom1, lc2 = kLinkCom2, i1 = kLinkMoment, i2 = kLinkMoment;
    const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
    const double d1 =
        m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * std::cos(theta2)) + i1 + i2;
    const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * std::cos(theta2)) + i2;
    const double phi2 = m2 * lc2 * kGravity * std::cos(theta1 + theta2 - M_PI / 2.0);
    const double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * std::sin(theta2) -
                        2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                        (m1 * lc1 + m2 * l1) * kGravity * std::cos(theta1 - M_PI / 2) + phi2;
    const double ddtheta2 =
        (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * std::sin(theta2) - phi2) /
        (m2 * lc2 * lc2 + i2 - d2 * d2 / d1);
    const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    d[0] = dtheta1;
    d[1] = dtheta2;
    d[2] = ddtheta1;
    d[3] = ddtheta2;
  }
  // x moved by whole turns into [lo, hi] (Gymnasium's wrap).
  static double wrap(double x, double lo, double hi) {
    const double diff = hi - lo;
    while (x > hi) x -= diff;
    while (x < lo) x += diff;
    return x;
  }
  static double bound(double x, double lo, double hi) { return std::fmin(std::fmax(x, lo), hi); }

  static StepOutcome step(double* s, int action) {
    const double torque = double(action - 1);
    double k1[4], k2[4], k3[4], k4[4], y[4];
    const double half = kDt / 2.0;
    derivatives(s, torque, k1);
    for (int i = 0; i < 4; ++i) y[i] = s[i] + half * k1[i];
    derivatives(y, torque, k2);
    for (int i = 0; i < 4; ++i) y[i] = s[i] + half * k2[i];
    derivatives(y, torque, k3);
    for (int i = 0; i < 4; ++i) y[i] = s[i] + kDt * k3[i];
    derivatives(y, torque, k4);
    double next[4];
    for (int i = 0; i < 4; ++i)
      next[i] = s[i] + kDt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    s[0] = wrap(next[0], -M_PI, M_PI);
    s[1] = wrap(next[1], -M_PI, M_PI);
    s[2] = bound(next[2], -kMaxVel1, kMaxVel1);
    s[3] = bound(next[3], -kMaxVel2, kMaxVel2);
    const bool terminated = -std::cos(s[0]) - std::cos(s[1] + s[0]) > 1.0;
    return {terminated ? 0.0 : -1.0, terminated};
  }
  static void observe(const double* s, float* obs) {
    obs[0] = float(std::cos(s[0]));
    obs[1] = float(std::sin(s[0]));
    obs[2] = float(std::cos(s[1]));
    obs[3] = float(std::sin(s[1]));
    obs[4] = float(s[2]);
    obs[5] = float(s[3]);
  }
};

// MountainCar-v0: a car in a valley, pushed left, not at all, or right; -1 per step until it
// reaches position 0.5 on the right hill. Position bounded to [-1.2, 0.6] (stopping at the left
// wall), velocity to [-0.07, 0.07].
struct MountainCar {
  static constexpr int kStateSize = 2;  // position, velocity
  static constexpr int kObservationSize = 2;
  static constexpr int kActions = 3;  // push left, none, right
  static constexpr int kMaxEpisodeSteps = 200;
  static constexpr double kRewardThreshold = -110.0;

  static constexpr double kMinPosition = -1.2, kMaxPosition = 0.6, kMaxSpeed = 0.07;
  static constexpr double kGoalPosition = 0.5, kGoalVelocity = 0.0;
  static constexpr double kForce = 0.001, kGravity = 0.0025;
  static constexpr double kResetLow = -0.6, kResetHigh = -0.4;

  // A fresh episode: position uniform in [-0.6, -0.4), velocity 0.
  template <typename Uniform>
  static void reset(double* s, Uniform&& uniform) {
    s[0] = uniform(kResetLow, kResetHigh);
    s[1] = 0.0;
  }

  static StepOutcome step(double* s, int action) {
    double position = s[0], velocity = s[1];
    velocity += (action - 1) * kForce + std::cos(3 * position) * (-kGravity);
    velocity = std::fmin(std::fmax(velocity, -kMaxSpeed), kMaxSpeed);
    position += velocity;
    position = std::fmin(std::fmax(position, kMinPosition), kMaxPosition);
    if (position == kMinPosition && velocity < 0) velocity = 0;
    s[0] = position;
    s[1] = velocity;
    return {-1.0, position >= kGoalPosition && velocity >= kGoalVelocity};
  }
  static void observe(const double* s, float* obs) {
    obs[0] = float(s[0]);
    obs[1] = float(s[1]);
  }
};

// Pendulum-v1: a pendulum swung up by a torque in [-2, 2] (one continuous action, clipped);
// reward -(angle^2 + 0.1 velocity^2 + 0.001 torque^2), the angle normalised to [-pi, pi); it
// never terminates (the time limit ends it). Reset: angle uniform in [-pi, pi], velocity in
// [-1, 1]. The action's terms are computed in float64 from the float32 action (NumPy 2 computes
// u^2 and 3u in float32, NumPy 1 in float64: a difference below 1e-7 of those terms).
struct Pendulum {
  static constexpr int kStateSize = 2;        // theta, theta_dot
  static constexpr int kObservationSize = 3;  // cos theta, sin theta, theta_dot
  static constexpr int kActionDims = 1;
  static constexpr double kMaxTorque = 2.0;
  static constexpr int kMaxEpisodeSteps = 200;

  static constexpr double kMaxSpeed = 8.0, kDt = 0.05, kGravity = 10.0, kMass = 1.0, kLength = 1.0;
  static constexpr double kResetAngle = M_PI, kResetVelocity = 1.0;

  // A fresh episode: angle uniform in [-pi, pi), velocity in [-1, 1).
  template <typename Uniform>
  static void reset(double* s, Uniform&& uniform) {
    s[0] = uniform(-kResetAngle, kResetAngle);
    s[1] = uniform(-kResetVelocity, kResetVelocity);
  }

  // Python's ((x + pi) % (2 pi)) - pi: the result of % has the divisor's sign.
  static double angle_normalize(double x) {
    const double period = 2 * M_PI;
    double r = std::fmod(x + M_PI, period);
    if (r != 0 && r < 0) r += period;
    return r - M_PI;
  }
  static StepOutcome step(double* s, float action) {
    const double th = s[0], thdot = s[1];
    const double u = std::fmin(std::fmax(double(action), -kMaxTorque), kMaxTorque);
    const double a = angle_normalize(th);
    const double costs = a * a + 0.1 * (thdot * thdot) + 0.001 * (u * u);
    double newthdot =
        thdot +
        (3 * kGravity / (2 * kLength) * std::sin(th) + 3.0 / (kMass * kLength * kLength) * u) * kDt;
    newthdot = std::fmin(std::fmax(newthdot, -kMaxSpeed), kMaxSpeed);
    s[0] = th + newthdot * kDt;
    s[1] = newthdot;
    return {-costs, false};
  }
  static void observe(const double* s, float* obs) {
    obs[0] = float(std::cos(s[0]));
    obs[1] = float(std::sin(s[0]));
    obs[2] = float(s[1]);
  }
};

}  // namespace hg::rl::classic
