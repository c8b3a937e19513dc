// PPO on CartPole-v1 with CleanRL's hyperparameters (rl/ppo.h): a short run learns (the greedy
// policy balances far longer than a random one), the same seed gives the same run, the
// orthogonal initialisation, and bad settings refused by name.
#include "hourglass/rl/policy_evaluation.h"
#include "hourglass/rl/ppo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "hourglass/base/error.h"
#include "hourglass/nn/init.h"
#include "support/expect_error.h"

namespace hg::rl {
namespace {

PpoConfig short_run(uint64_t seed) {
  PpoConfig c;
  c.total_steps = 50000;  // 97 iterations of 4 x 128 steps
  c.seed = seed;
  return c;
}

// A random policy keeps CartPole up for about 22 steps; after 50,000 steps of PPO the greedy
// policy keeps it up for hundreds (370 to 495 over seeds 1-6 on the development machine). The
// bound leaves room for other CPUs' kernels, whose rounding differs.
TEST(Ppo, LearnsCartPoleInAShortRun) {
  ActorCritic agent(4, 2, 64);
  agent.initialize(1);
  int64_t iterations_seen = 0;
  const PpoResult result = train_ppo(short_run(1), agent, [&](const PpoIteration& it) {
    ++iterations_seen;
    EXPECT_TRUE(std::isfinite(it.policy_loss) && std::isfinite(it.value_loss) &&
                std::isfinite(it.entropy) && std::isfinite(it.approx_kl));
    EXPECT_GE(it.clip_fraction, 0.0);
    EXPECT_LE(it.clip_fraction, 1.0);
  });
  EXPECT_EQ(result.iterations, 97);
  EXPECT_EQ(iterations_seen, 97);
  EXPECT_EQ(result.global_step, 97 * 512);
  // The learning rate anneals linearly from 2.5e-4.
  EXPECT_DOUBLE_EQ(result.history.front().learning_rate, 2.5e-4);
  EXPECT_NEAR(result.history.back().learning_rate, 2.5e-4 / 97, 1e-12);
  // Training returns rise: the last ten iterations' episodes against the first ten's.
  auto mean_return = [&](size_t from, size_t to) {
    double sum = 0;
    int64_t count = 0;
    for (size_t i = from; i < to; ++i)
      for (double r : result.history[i].episode_returns) {
        sum += r;
        ++count;
      }
    return count > 0 ? sum / double(count) : 0.0;
  };
  const double early = mean_return(0, 10), late = mean_return(87, 97);
  EXPECT_LT(early, 60.0);
  EXPECT_GT(late, 3 * early);
  const PolicyEvaluation eval = evaluate_policy(agent, "CartPole-v1", 20, 1001);
  ASSERT_EQ(eval.returns.size(), 20u);
  EXPECT_GT(eval.mean, 200.0);
}

TEST(Ppo, SameSeedSameRun) {
  PpoConfig c = short_run(3);
  c.total_steps = 4 * 512;
  auto run = [&] {
    ActorCritic agent(4, 2, 64);
    agent.initialize(3);
    train_ppo(c, agent);
    return agent.state_dict();
  };
  const auto a = run(), b = run();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
}

// Orthogonal initialisation: rows orthonormal (times the gain) when there are fewer rows than
// columns, columns when fewer columns.
TEST(Ppo, OrthogonalInitialisation) {
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{3, 8}, {8, 3}, {5, 5}}) {
    Tensor w = Tensor::zeros({rows, cols});
    RandomStream rng(7, 7);
    nn::orthogonal_(w, 2.0, rng);
    const auto v = w.to_vector<float>();
    const bool by_rows = rows <= cols;
    const int64_t count = by_rows ? rows : cols, length = by_rows ? cols : rows;
    for (int64_t p = 0; p < count; ++p)
      for (int64_t q = 0; q < count; ++q) {
        double dot = 0;
        for (int64_t k = 0; k < length; ++k) {
          const double a = by_rows ? v[size_t(p * cols + k)] : v[size_t(k * cols + p)];
          const double b = by_rows ? v[size_t(q * cols + k)] : v[size_t(k * cols + q)];
          dot += a * b;
        }
        EXPECT_NEAR(dot, p == q ? 4.0 : 0.0, 1e-5) << rows << "x" << cols;
      }
  }
}

// The Gaussian policy's log-probability and entropy against the formula in double, and their
// gradients with respect to the log standard deviation against central differences.
TEST(Ppo, GaussianLogProbabilityAndEntropy) {
  ActorCritic agent(3, 2, 8, ActionKind::Continuous);
  agent.initialize(5);
  Tensor log_std;
  for (const auto& p : agent.named_parameters())
    if (p.name == "actor_logstd") log_std = p.tensor;
  ASSERT_TRUE(log_std.defined());
  log_std.copy_(Tensor::from_vector<float>({0.3f, -0.7f}, {2, 1}));
  const Tensor x = Tensor::from_vector<float>({0.1f, -0.2f, 0.5f, 1.0f, 0.0f, -1.5f}, {2, 3});
  const Tensor action = Tensor::from_vector<float>({0.4f, -1.2f, 2.0f, 0.1f}, {2, 2});
  const auto [logp, entropy] = policy_log_prob_entropy(agent, x, action);
  const auto mean = agent(x).to_vector<float>();
  const auto a = action.to_vector<float>(), lp = logp.to_vector<float>();
  const double ls[2] = {0.3, -0.7}, half_log_2pi = 0.5 * std::log(2 * M_PI);
  for (int r = 0; r < 2; ++r) {
    double ref = 0;
    for (int j = 0; j < 2; ++j) {
      const double z = (a[size_t(r * 2 + j)] - mean[size_t(r * 2 + j)]) / std::exp(ls[j]);
      ref += -0.5 * z * z - ls[j] - half_log_2pi;
    }
    EXPECT_NEAR(lp[size_t(r)], ref, 1e-5) << r;
  }
  EXPECT_NEAR(entropy.item(), 2 * (0.5 + half_log_2pi) + ls[0] + ls[1], 1e-5);
}

TEST(Ppo, ContinuousPendulumRunsAndNormalises) {
  PpoConfig c = ppo_defaults(ActionKind::Continuous);
  c.env = "Pendulum-v1";
  c.total_steps = 4096;
  c.seed = 2;
  ASSERT_TRUE(c.norm_obs && c.norm_reward);
  std::unique_ptr<ActorCritic> agent = make_agent(c);
  agent->initialize(2);
  EXPECT_TRUE(agent->continuous());
  EXPECT_TRUE(agent->normalizes_observations());
  const PpoResult result = train_ppo(c, *agent, [&](const PpoIteration& it) {
    EXPECT_TRUE(std::isfinite(it.policy_loss) && std::isfinite(it.value_loss));
    EXPECT_EQ(it.episode_returns.size(), 10u);  // 200-step episodes: 10 end in each 2048 steps
  });
  EXPECT_EQ(result.iterations, 2);
  // The observation statistics saw every observation: 4096 steps and the first reset.
  for (const auto& [name, t] : agent->state_dict())
    if (name == "obs_count") EXPECT_NEAR(t.to_vector<double>()[0], 4097 + 1e-4, 1e-6);
  const PolicyEvaluation eval = evaluate_agent(*agent, c, 4, 9);
  EXPECT_EQ(eval.returns.size(), 4u);
  for (double r : eval.returns) EXPECT_LT(r, 0.0);  // Pendulum's rewards are all negative
}

TEST(Ppo, BadSettingsAreRefusedByName) {
  auto expect_error = [](const std::function<void(PpoConfig&)>& change, const std::string& part) {
    PpoConfig c;
    change(c);
    test::expect_invalid([&] { validate(c); }, {part});
  };
  expect_error([](PpoConfig& c) { c.num_minibatches = 3; }, "num_minibatches (3) must divide");
  expect_error([](PpoConfig& c) { c.total_steps = 100; }, "total_steps (100)");
  expect_error([](PpoConfig& c) { c.clip_coef = 0; }, "clip_coef");
  expect_error([](PpoConfig& c) { c.gamma = 1.5; }, "gamma");
  expect_error([](PpoConfig& c) { c.num_envs = 0; }, "num_envs");
  ActorCritic agent(3, 1, 8);
  PpoConfig pendulum;
  pendulum.env = "Pendulum-v1";
  try {
    train_ppo(pendulum, agent);
    ADD_FAILURE() << "continuous actions accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Pendulum-v1's are continuous"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hg::rl
