// DQN on CartPole-v1 (rl/dqn.h): a short run with CleanRL's structure learns, the same seed gives
// the same run, the epsilon schedule, and bad settings refused by name.
#include "hourglass/rl/dqn.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "hourglass/base/error.h"
#include "hourglass/rl/policy_evaluation.h"
#include "support/expect_error.h"

namespace hg::rl {
namespace {

// CleanRL's settings, scaled to a run of 30,000 steps: exploration over the first half, updates
// from step 3,000 on. A random policy keeps CartPole up for about 22 steps.
DqnConfig short_run(uint64_t seed) {
  DqnConfig c;
  c.total_steps = 30000;
  c.learning_starts = 3000;
  c.seed = seed;
  return c;
}

TEST(Dqn, LearnsCartPoleInAShortRun) {
  QNetwork q(4, 2, {120, 84});
  q.initialize(1);
  std::vector<DqnProgress> reports;
  const DqnResult result = train_dqn(
      short_run(1), q, [&](const DqnProgress& p) { reports.push_back(p); }, 5000);
  EXPECT_EQ(result.global_step, 30000);
  EXPECT_EQ(result.updates, 2699);  // steps 3,010, 3,020, ... 29,990
  ASSERT_EQ(reports.size(), 6u);
  EXPECT_DOUBLE_EQ(reports.front().epsilon, 1.0 + (0.05 - 1.0) / 15000.0 * 4999.0);
  EXPECT_DOUBLE_EQ(reports.back().epsilon, 0.05);
  EXPECT_TRUE(std::isfinite(reports.back().td_loss));
  EXPECT_GT(reports.back().q_mean, 1.0);  // values of staying up, no longer ~0
  const PolicyEvaluation eval = evaluate_policy(q, "CartPole-v1", 20, 1001);
  EXPECT_GT(eval.mean, 100.0);
}

TEST(Dqn, SameSeedSameRun) {
  DqnConfig c = short_run(2);
  c.total_steps = 4000;
  c.learning_starts = 1000;
  auto run = [&] {
    QNetwork q(4, 2, c.hidden);
    q.initialize(2);
    train_dqn(c, q);
    return q.state_dict();
  };
  const auto a = run(), b = run();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
}

TEST(Dqn, BadSettingsAreRefusedByName) {
  auto expect_error = [](const std::function<void(DqnConfig&)>& change, const std::string& part) {
    DqnConfig c;
    change(c);
    test::expect_invalid([&] { validate(c); }, {part});
  };
  expect_error([](DqnConfig& c) { c.tau = 0; }, "tau");
  expect_error([](DqnConfig& c) { c.buffer_size = 0; }, "buffer_size");
  expect_error([](DqnConfig& c) { c.exploration_fraction = 2; }, "exploration_fraction");
  expect_error([](DqnConfig& c) { c.hidden = {}; }, "hidden");
  QNetwork q(3, 1, {8});
  DqnConfig pendulum;
  pendulum.env = "Pendulum-v1";
  EXPECT_THROW(train_dqn(pendulum, q), Error);
}

}  // namespace
}  // namespace hg::rl
