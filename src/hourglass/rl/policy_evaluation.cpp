#include "hourglass/rl/policy_evaluation.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "hourglass/autograd/tape.h"
#include "hourglass/base/error.h"
#include "hourglass/rl/env/vector_env.h"

namespace hg::rl {

PolicyEvaluation evaluate_policy(nn::Module& agent, const std::string& env_id, int64_t episodes,
                                 uint64_t seed, const ObservationTransform& prepare) {
  HG_CHECK(episodes > 0, "evaluate_policy: episodes must be positive, got {}", episodes);
  autograd::NoGradGuard no_grad;
  const int64_t copies = std::min<int64_t>(episodes, 16);
  auto env = make_vector_env(env_id, copies);
  env->reset(seed);
  const int64_t obs_size = env->spec().observation_size, actions = env->spec().action_count;
  const bool continuous = env->spec().action_kind == ActionKind::Continuous;
  PolicyEvaluation out;
  std::vector<int32_t> act(static_cast<size_t>(copies));
  // Each copy contributes its finished episodes in order until `episodes` are in: the first
  // episodes of the copies, then the second ones, and so on, so the set does not depend on
  // which copy finishes first.
  std::vector<std::vector<double>> per_copy(static_cast<size_t>(copies));
  const int64_t per = (episodes + copies - 1) / copies;
  auto enough = [&] {
    for (const auto& p : per_copy)
      if (int64_t(p.size()) < per) return false;
    return true;
  };
  while (!enough()) {
    std::vector<float> o(env->observations().begin(), env->observations().end());
    if (prepare) prepare(o.data(), copies);
    const Tensor scores = agent(Tensor::from_vector(o, {copies, obs_size}));
    const float* s = scores.data<float>();
    if (continuous) {
      env->step(std::span<const float>(s, size_t(copies * actions)));
    } else {
      for (int64_t i = 0; i < copies; ++i)
        act[size_t(i)] =
            int32_t(std::max_element(s + i * actions, s + (i + 1) * actions) - (s + i * actions));
      env->step(std::span<const int32_t>(act));
    }
    for (int64_t i = 0; i < copies; ++i)
      if (env->terminated()[size_t(i)] || env->truncated()[size_t(i)])
        per_copy[size_t(i)].push_back(env->episode_returns()[size_t(i)]);
  }
  for (int64_t round = 0; round < per && int64_t(out.returns.size()) < episodes; ++round)
    for (int64_t i = 0; i < copies && int64_t(out.returns.size()) < episodes; ++i)
      out.returns.push_back(per_copy[size_t(i)][size_t(round)]);
  double sum = 0, sq = 0;
  for (double r : out.returns) sum += r;
  out.mean = sum / double(out.returns.size());
  for (double r : out.returns) sq += (r - out.mean) * (r - out.mean);
  out.std = std::sqrt(sq / double(out.returns.size()));
  return out;
}

}  // namespace hg::rl
