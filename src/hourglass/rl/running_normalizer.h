// Running normalisation of observations and rewards, as Gymnasium's NormalizeObservation and
// NormalizeReward wrappers do it (CleanRL's continuous-action PPO uses both): a running mean and
// variance merged batch by batch (Chan et al.'s parallel update, starting from a count of
// 1e-4), observations shifted and scaled by it, rewards scaled by the deviation of a discounted
// running return, both then clipped. The statistics live in plain vectors so the agent (for the
// observations, which evaluation must see normalised alike) or the run (the rewards) can keep
// them as checkpointed tensors.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hg::rl {

struct RunningMeanStd {
  std::vector<double> mean, var;  // per dimension
  double count = 1e-4;

  explicit RunningMeanStd(int64_t dims = 1)
      : mean(static_cast<size_t>(dims), 0.0), var(static_cast<size_t>(dims), 1.0) {}
  // Merges `rows` rows of `values` ([rows, dims] row-major) into the statistics.
  void update(const float* values, int64_t rows);
  int64_t dims() const { return int64_t(mean.size()); }
};

// In place: x = clip((x - mean) / sqrt(var + 1e-8), -clip, clip) for each of `rows` rows.
void normalize_rows(const RunningMeanStd& stats, float* values, int64_t rows, double clip);

// Gymnasium's NormalizeReward over N copies: each copy's discounted return
// g = g * gamma * (1 - terminated) + r updates the statistics, and the reward is divided by
// sqrt(var + 1e-8), then clipped.
struct RewardNormalizer {
  RunningMeanStd stats{1};
  std::vector<double> discounted;  // per copy
  double gamma = 0.99, clip = 10.0;

  RewardNormalizer(int64_t copies, double gamma_, double clip_)
      : discounted(static_cast<size_t>(copies), 0.0), gamma(gamma_), clip(clip_) {}
  void apply(float* rewards, std::span<const uint8_t> terminated);
};

}  // namespace hg::rl
