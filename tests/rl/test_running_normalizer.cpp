// Running normalisation (rl/running_normalizer.h) against Gymnasium's definitions worked in
// float64 here: the merged mean and variance equal a two-pass computation over everything seen
// (with the 1e-4 prior count), observations shifted, scaled and clipped, rewards scaled by the
// deviation of the discounted return that a termination restarts.
#include "hourglass/rl/running_normalizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hourglass/base/rng.h"

namespace hg::rl {
namespace {

TEST(RunningNormalizer, MergedStatisticsMatchATwoPassComputation) {
  RandomStream rng(4, 4);
  RunningMeanStd stats(3);
  std::vector<std::vector<double>> seen(3);
  for (int batch = 0; batch < 20; ++batch) {
    const int rows = 1 + batch % 7;
    std::vector<float> values(static_cast<size_t>(rows * 3));
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < 3; ++j) {
        const float v = float(3.0 * j + (j + 1) * rng.normal());
        values[size_t(r * 3 + j)] = v;
        seen[size_t(j)].push_back(v);
      }
    stats.update(values.data(), rows);
  }
  for (int j = 0; j < 3; ++j) {
    // The prior: mean 0, variance 1, weight 1e-4, merged with the data.
    const double n = double(seen[size_t(j)].size()), prior = 1e-4, total = n + prior;
    double sum = 0;
    for (double v : seen[size_t(j)]) sum += v;
    const double data_mean = sum / n;
    double m2 = 0;
    for (double v : seen[size_t(j)]) m2 += (v - data_mean) * (v - data_mean);
    const double mean = data_mean * n / total;
    const double var = (m2 + prior * 1.0 + data_mean * data_mean * prior * n / total) / total;
    EXPECT_NEAR(stats.mean[size_t(j)], mean, 1e-9 * (1 + std::fabs(mean)));
    EXPECT_NEAR(stats.var[size_t(j)], var, 1e-9 * var);
  }
  EXPECT_NEAR(stats.count, 1e-4 + double(seen[0].size()), 1e-9);
}

TEST(RunningNormalizer, ObservationsAreShiftedScaledAndClipped) {
  RunningMeanStd stats(2);
  stats.mean = {1.0, -2.0};
  stats.var = {4.0, 0.01};
  std::vector<float> x = {3.0f, -2.0f, 1.0f, 100.0f};
  normalize_rows(stats, x.data(), 2, 10.0);
  EXPECT_NEAR(x[0], 2.0 / std::sqrt(4.0 + 1e-8), 1e-6);
  EXPECT_NEAR(x[1], 0.0, 1e-6);
  EXPECT_NEAR(x[2], 0.0, 1e-6);
  EXPECT_EQ(x[3], 10.0f);  // 102 / 0.1 clipped
}

TEST(RunningNormalizer, RewardsScaleByTheDiscountedReturnsDeviation) {
  RewardNormalizer norm(2, 0.5, 10.0);
  std::vector<double> g = {0, 0};
  RunningMeanStd reference(1);
  const std::vector<std::vector<float>> rewards = {{1, 2}, {1, 2}, {3, -1}, {1, 1}};
  const std::vector<std::vector<uint8_t>> terminated = {{0, 0}, {1, 0}, {0, 0}, {0, 1}};
  for (size_t t = 0; t < rewards.size(); ++t) {
    std::vector<float> r = rewards[t];
    std::vector<float> returns(2);
    for (size_t i = 0; i < 2; ++i) {
      g[i] = g[i] * 0.5 * (terminated[t][i] ? 0 : 1) + rewards[t][i];
      returns[i] = float(g[i]);
    }
    reference.update(returns.data(), 2);
    norm.apply(r.data(), terminated[t]);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_DOUBLE_EQ(norm.discounted[i], g[i]) << "step " << t;
      EXPECT_NEAR(r[i], rewards[t][i] / std::sqrt(reference.var[0] + 1e-8), 1e-6) << "step " << t;
    }
  }
}

}  // namespace
}  // namespace hg::rl
