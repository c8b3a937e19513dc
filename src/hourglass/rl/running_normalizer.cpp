#include "hourglass/rl/running_normalizer.h"

#include <algorithm>
#include <cmath>

namespace hg::rl {

namespace {
constexpr double kEpsilon = 1e-8;
}

void RunningMeanStd::update(const float* values, int64_t rows) {
  if (rows <= 0) return;
  const int64_t d = dims();
  const double n = double(rows);
  for (int64_t j = 0; j < d; ++j) {
    double batch_mean = 0;
    for (int64_t r = 0; r < rows; ++r) batch_mean += values[r * d + j];
    batch_mean /= n;
    double batch_var = 0;  // the population variance, as numpy's var()
    for (int64_t r = 0; r < rows; ++r) {
      const double e = values[r * d + j] - batch_mean;
      batch_var += e * e;
    }
    batch_var /= n;
    const double delta = batch_mean - mean[size_t(j)];
    const double total = count + n;
    const double m2 = var[size_t(j)] * count + batch_var * n + delta * delta * count * n / total;
    mean[size_t(j)] += delta * n / total;
    var[size_t(j)] = m2 / total;
  }
  count += n;
}

void normalize_rows(const RunningMeanStd& stats, float* values, int64_t rows, double clip) {
  const int64_t d = stats.dims();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < d; ++j) {
      float& v = values[r * d + j];
      const double z =
          (double(v) - stats.mean[size_t(j)]) / std::sqrt(stats.var[size_t(j)] + kEpsilon);
      v = float(std::clamp(z, -clip, clip));
    }
}

void RewardNormalizer::apply(float* rewards, std::span<const uint8_t> terminated) {
  const auto n = int64_t(discounted.size());
  std::vector<float> returns(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double& g = discounted[size_t(i)];
    g = g * gamma * (terminated[size_t(i)] ? 0.0 : 1.0) + double(rewards[i]);
    returns[size_t(i)] = float(g);
  }
  stats.update(returns.data(), n);
  const double scale = std::sqrt(stats.var[0] + kEpsilon);
  for (int64_t i = 0; i < n; ++i)
    rewards[i] = float(std::clamp(double(rewards[i]) / scale, -clip, clip));
}

}  // namespace hg::rl
