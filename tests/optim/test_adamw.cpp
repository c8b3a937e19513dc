// optim::AdamW over a flat parameter arena: hand-computed steps, the weight-decay split,
// skipped (fp16 overflow) steps, and checkpoint state round trips (the bias correction must
// continue from the restored count of applied updates, also from checkpoints older than it);
// optim::Lamb against a float64 transcription of timm's Lamb.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "hourglass/optim/adamw.h"
#include "hourglass/optim/lamb.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/reference_dense.h"

namespace hg {
namespace {

using optim::AdamW;
using Rows = std::vector<std::vector<double>>;

FlatParameters small_arena() {
  return {Tensor::from_vector<float>({1.0f, -2.0f, 0.5f, 3.0f}, {4}), Tensor::zeros({4}), 2};
}
const Rows kGrads = {{0.1, 0.2, -0.3, 0.0}, {0.05, -0.1, 0.2, 1.0}, {-0.2, 0.0, 0.1, -0.5}};

AdamWOptions options(double lr, double wd) {
  AdamWOptions o;
  o.lr = lr;
  o.weight_decay = wd;
  return o;  // betas (0.9, 0.999), eps 1e-8
}

void run_three_steps(const AdamWOptions& o, const Rows& expected) {
  FlatParameters flat = small_arena();
  AdamW adamw(flat, o);
  for (size_t s = 0; s < 3; ++s) {
    flat.grads.copy_(test::f32_tensor(kGrads[s], {4}));
    adamw.step();
    // Adam normalises the update to ~lr, so f32 rounding of the moments shows at ~1e-7.
    EXPECT_TRUE(test::all_close(flat.params, expected[s], test::Tolerance{1e-6, 1e-6}))
        << "after step " << s + 1;
  }
}

// Worked by hand from PyTorch's rule: p *= 1 - lr wd (prefix only); m = 0.9 m + 0.1 g;
// v = 0.999 v + 0.001 g^2; p -= lr (m / (1 - 0.9^t)) / (sqrt(v / (1 - 0.999^t)) + 1e-8).
TEST(AdamW, StepsWithWeightDecayOnPrefix) {
  // Element 0 step 1: p = 1 * (1 - 0.01) = 0.99, m^ = 0.1, sqrt(v^) = 0.1: p = 0.99 - 0.1 = 0.89
  // (the eps shifts it by 1e-8). Element 3 has g = 0 on step 1 and does not move.
  run_three_steps(options(0.1, 0.1), {{0.89000001, -2.08, 0.599999997, 3},
                                      {0.787882058, -2.0858337, 0.614452049, 2.92558632},
                                      {0.800638938, -2.08556329, 0.608130068, 2.90272228}});
}

TEST(AdamW, StepsWithoutWeightDecay) {
  run_three_steps(options(0.1, 0.0), {{0.90000001, -2.1, 0.599999997, 3},
                                      {0.806782058, -2.1266337, 0.614452049, 2.92558632},
                                      {0.827417759, -2.14722163, 0.608130068, 2.90272228}});
}

TEST(AdamW, DecaySplitMatchesPerElementReference) {
  const int64_t n = 100003;
  for (int64_t decay_count : {int64_t(0), int64_t(3), int64_t(77777), n}) {
    SCOPED_TRACE(testing::Message() << "decay_count=" << decay_count);
    const auto init = test::round_f32(test::random_values(n, 8));
    FlatParameters flat{test::f32_tensor(init, {n}), Tensor::zeros({n}), decay_count};
    AdamW adamw(flat, options(0.01, 0.2));
    test::ref::AdamWState decayed{init, {}, {}, 0}, plain{init, {}, {}, 0};
    for (int s = 0; s < 3; ++s) {
      const auto g = test::round_f32(test::random_values(n, uint64_t(9 + s)));
      flat.grads.copy_(test::f32_tensor(g, {n}));
      adamw.step();
      test::ref::adamw_step(decayed, g, 0.01, 0.9, 0.999, 1e-8, 0.2);
      test::ref::adamw_step(plain, g, 0.01, 0.9, 0.999, 1e-8, 0.0);
    }
    std::vector<double> expected(plain.param);
    std::copy(decayed.param.begin(), decayed.param.begin() + decay_count, expected.begin());
    EXPECT_TRUE(test::all_close(flat.params, expected, test::tolerance_for(DType::F32, 10)));
  }
}

TEST(AdamW, StateRoundTripResumesExactly) {
  const AdamWOptions o = options(0.1, 0.1);
  FlatParameters a = small_arena();
  AdamW full(a, o);
  for (const auto& g : kGrads) {
    a.grads.copy_(test::f32_tensor(g, {4}));
    full.step();
  }
  FlatParameters b = small_arena();
  optim::NamedTensors saved;
  {
    AdamW first(b, o);
    for (size_t s = 0; s < 2; ++s) {
      b.grads.copy_(test::f32_tensor(kGrads[s], {4}));
      first.step();
    }
    for (const auto& [name, t] : first.state()) saved.push_back({name, t.clone()});
  }
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_EQ(saved[0].first, "exp_avg");
  EXPECT_EQ(saved[1].first, "exp_avg_sq");
  EXPECT_EQ(saved[2].first, "applied_steps");
  EXPECT_EQ(saved[2].second.to_vector<float>(), std::vector<float>{2.0f});
  AdamW resumed(b, o);
  resumed.load_state(saved, 2);
  b.grads.copy_(test::f32_tensor(kGrads[2], {4}));
  resumed.step();
  EXPECT_EQ(resumed.step_count(), 3);
  EXPECT_EQ(b.params.to_vector<float>(), a.params.to_vector<float>());
}

float applied_steps(const AdamW& adamw) {
  for (const auto& [name, t] : adamw.state())
    if (name == "applied_steps") return t.to_vector<float>().at(0);
  ADD_FAILURE() << "no applied_steps in the state";
  return -1;
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// Steps with a loss-scaler-like skip flag: `skipped[s]` sets the flag for step s (its gradients
// are then garbage, as an overflowed fp16 step's are).
void run_with_skips(AdamW& adamw, FlatParameters& flat, Tensor& flag, const Rows& grads,
                    const std::vector<bool>& skipped) {
  for (size_t s = 0; s < skipped.size(); ++s) {
    flag.fill_(skipped[s] ? 1.0 : 0.0);
    flat.grads.copy_(skipped[s] ? test::f32_tensor({1e3, -7, 1e-3, 5}, {4})
                                : test::f32_tensor(grads[s], {4}));
    adamw.step();
  }
}

TEST(AdamW, SkippedStepChangesNothingAndIsNotCounted) {
  // PyTorch's semantics (GradScaler skips optimizer.step()): a skipped step leaves the
  // parameters, both moments and the count of applied updates as they were, and the next
  // update uses count + 1 for its bias corrections. Only step_count() (the schedule's
  // position) moves on.
  const AdamWOptions o = options(0.1, 0.1);
  FlatParameters flat = small_arena();
  AdamW adamw(flat, o);
  Tensor flag = Tensor::zeros({1});
  adamw.set_skip_flag(flag);
  run_with_skips(adamw, flat, flag, {kGrads[0]}, {false});
  const auto p1 = values(flat.params);
  const auto m1 = values(adamw.state()[0].second), v1 = values(adamw.state()[1].second);
  EXPECT_EQ(applied_steps(adamw), 1.0f);

  run_with_skips(adamw, flat, flag, {{}}, {true});
  EXPECT_EQ(adamw.step_count(), 2);
  EXPECT_EQ(applied_steps(adamw), 1.0f) << "a skipped update is not counted";
  EXPECT_EQ(values(flat.params), p1);
  EXPECT_EQ(values(adamw.state()[0].second), m1);
  EXPECT_EQ(values(adamw.state()[1].second), v1);

  // The next update is update 2: exactly what a run without the skipped step computes, and
  // the hand-worked second step of StepsWithWeightDecayOnPrefix.
  run_with_skips(adamw, flat, flag, {kGrads[1]}, {false});
  EXPECT_EQ(adamw.step_count(), 3);
  EXPECT_EQ(applied_steps(adamw), 2.0f);
  FlatParameters plain = small_arena();
  AdamW no_skips(plain, o);
  for (size_t s = 0; s < 2; ++s) {
    plain.grads.copy_(test::f32_tensor(kGrads[s], {4}));
    no_skips.step();
  }
  EXPECT_EQ(values(flat.params), values(plain.params));
  EXPECT_TRUE(test::all_close(flat.params, {0.787882058, -2.0858337, 0.614452049, 2.92558632},
                              test::Tolerance{1e-6, 1e-6}));
}

TEST(AdamW, SkipsMatchFloat64ReferenceOfAppliedSteps) {
  // Over a larger arena with the weight-decay split (two op calls share the count): skips at
  // the start (common while the fp16 scale settles), in the middle and twice in a row.
  const int64_t n = 10007, decay_count = 4000;
  const std::vector<bool> skipped{true, true, false, false, true, false, true, true, false};
  const auto init = test::round_f32(test::random_values(n, 60));
  FlatParameters flat{test::f32_tensor(init, {n}), Tensor::zeros({n}), decay_count};
  AdamW adamw(flat, options(0.01, 0.2));
  Tensor flag = Tensor::zeros({1});
  adamw.set_skip_flag(flag);
  test::ref::AdamWState decayed{init, {}, {}, 0}, plain{init, {}, {}, 0};
  for (size_t s = 0; s < skipped.size(); ++s) {
    const auto g = test::round_f32(test::random_values(n, 61 + s));
    flag.fill_(skipped[s] ? 1.0 : 0.0);
    flat.grads.copy_(test::f32_tensor(g, {n}));
    adamw.step();
    if (skipped[s]) continue;
    test::ref::adamw_step(decayed, g, 0.01, 0.9, 0.999, 1e-8, 0.2);
    test::ref::adamw_step(plain, g, 0.01, 0.9, 0.999, 1e-8, 0.0);
  }
  EXPECT_EQ(adamw.step_count(), int64_t(skipped.size()));
  EXPECT_EQ(applied_steps(adamw), float(decayed.step));
  std::vector<double> expected(plain.param);
  std::copy(decayed.param.begin(), decayed.param.begin() + decay_count, expected.begin());
  // Four applied updates, each a handful of roundings carried forward by the moments.
  EXPECT_TRUE(test::all_close(flat.params, expected, test::tolerance_for(DType::F32, 10)));
}

optim::NamedTensors copy_state(const AdamW& adamw) {
  optim::NamedTensors saved;
  for (const auto& [name, t] : adamw.state()) saved.push_back({name, t.clone()});
  return saved;
}

TEST(AdamW, ResumeAfterSkippedStepsIsExact) {
  const AdamWOptions o = options(0.1, 0.1);
  const Rows grads = {kGrads[0], {}, kGrads[1], kGrads[2]};
  const std::vector<bool> skipped{false, true, false, false};
  FlatParameters a = small_arena();
  AdamW full(a, o);
  Tensor flag_a = Tensor::zeros({1});
  full.set_skip_flag(flag_a);
  run_with_skips(full, a, flag_a, grads, skipped);

  FlatParameters b = small_arena();
  optim::NamedTensors saved;
  {
    AdamW first(b, o);
    Tensor flag = Tensor::zeros({1});
    first.set_skip_flag(flag);
    run_with_skips(first, b, flag, {grads[0], grads[1]}, {false, true});
    saved = copy_state(first);
    EXPECT_EQ(first.step_count(), 2);
  }
  AdamW resumed(b, o);
  Tensor flag_b = Tensor::zeros({1});
  resumed.set_skip_flag(flag_b);
  resumed.load_state(saved, 2);
  EXPECT_EQ(applied_steps(resumed), 1.0f);
  run_with_skips(resumed, b, flag_b, {grads[2], grads[3]}, {false, false});
  EXPECT_EQ(resumed.step_count(), 4);
  EXPECT_EQ(applied_steps(resumed), 3.0f);
  EXPECT_EQ(values(b.params), values(a.params));
}

TEST(AdamW, CheckpointWithoutAppliedStepsTakesTheStepCount) {
  // Checkpoints written before "applied_steps" existed hold only the moments; their runs used
  // the step count for the bias corrections, so the resumed run continues with it.
  const AdamWOptions o = options(0.1, 0.1);
  FlatParameters a = small_arena();
  AdamW full(a, o);
  for (const auto& g : kGrads) {
    a.grads.copy_(test::f32_tensor(g, {4}));
    full.step();
  }
  FlatParameters b = small_arena();
  optim::NamedTensors old_format;
  {
    AdamW first(b, o);
    for (size_t s = 0; s < 2; ++s) {
      b.grads.copy_(test::f32_tensor(kGrads[s], {4}));
      first.step();
    }
    for (auto& entry : copy_state(first))
      if (entry.first != "applied_steps") old_format.push_back(entry);
  }
  ASSERT_EQ(old_format.size(), 2u);
  AdamW resumed(b, o);
  resumed.load_state(old_format, 2);
  EXPECT_EQ(applied_steps(resumed), 2.0f);
  b.grads.copy_(test::f32_tensor(kGrads[2], {4}));
  resumed.step();
  EXPECT_EQ(applied_steps(resumed), 3.0f);
  EXPECT_EQ(values(b.params), values(a.params));
  EXPECT_FALSE(resumed.missing_state("exp_avg", 2).defined()) << "the moments are required";
}

TEST(AdamW, LoadStateStillRejectsBadEntries) {
  FlatParameters flat = small_arena();
  AdamW adamw(flat, options(0.1, 0.0));
  const Tensor m = Tensor::zeros({4}), v = Tensor::zeros({4});
  test::expect_invalid(
      [&] {
        adamw.load_state({{"exp_avg", m}}, 1);
      },
      {"adamw state", "missing entry 'exp_avg_sq'"});
  test::expect_invalid(
      [&] {
        adamw.load_state({{"exp_avg", m}, {"exp_avg_sq", v}, {"applied_steps", v}}, 1);
      },
      {"adamw state", "applied_steps", "f32[4]"});
  const Tensor one = Tensor::zeros({1});
  test::expect_invalid(
      [&] {
        adamw.load_state({{"exp_avg", m}, {"exp_avg_sq", v}, {"step", one}}, 1);
      },
      {"adamw state", "unexpected entry 'step'"});
  // Nothing was copied by the failed loads.
  EXPECT_EQ(applied_steps(adamw), 0.0f);
}

TEST(AdamW, LrAndValidation) {
  FlatParameters flat = small_arena();
  AdamW adamw(flat, options(0.1, 0.0));
  EXPECT_STREQ(adamw.name(), "adamw");
  adamw.set_lr(0.5);
  EXPECT_EQ(adamw.lr(), 0.5);
  EXPECT_THROW(adamw.set_lr(-1), Error);
  AdamWOptions bad = options(0.1, 0.0);
  bad.beta2 = 1.0;
  EXPECT_THROW(AdamW(small_arena(), bad), Error);
  FlatParameters mismatched{Tensor::zeros({4}), Tensor::zeros({5}), 0};
  EXPECT_THROW(AdamW(mismatched, options(0.1, 0.0)), Error);
}

// LAMB over four tensors (3, 5, 2 and 4 elements; the first two take weight decay, the second
// starts at zero) for five steps, against a float64 transcription of timm's Lamb (no gradient
// clipping of its own): Adam's moments and bias-corrected direction d, plus wd w where the
// tensor decays; there d *= |w| / |d| (1 where a norm is 0; with the clip, at most 1); w -= lr d.
TEST(Lamb, MatchesTheFloat64TranscriptionOfTimmsLamb) {
  const std::vector<int64_t> offsets{0, 3, 8, 10, 14};
  for (const bool clip : {false, true}) {
    SCOPED_TRACE(clip ? "trust clip" : "no clip");
    std::vector<double> w = test::round_f32(test::random_values(14, 81));
    for (int i = 3; i < 8; ++i) w[size_t(i)] = 0.0;
    FlatParameters flat{test::f32_tensor(w, {14}), Tensor::zeros({14}), 8, offsets};
    AdamWOptions o = options(0.01, 0.1);
    o.eps = 1e-6;
    optim::Lamb lamb(flat, o, clip);
    EXPECT_STREQ(lamb.name(), "lamb");
    std::vector<double> m(14, 0.0), v(14, 0.0);
    for (int step = 1; step <= 5; ++step) {
      const std::vector<double> g =
          test::round_f32(test::random_values(14, uint64_t(90 + step), -0.3, 0.3));
      flat.grads.copy_(test::f32_tensor(g, {14}));
      lamb.step();
      const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.999, step);
      for (size_t t = 0; t + 1 < offsets.size(); ++t) {
        const bool decayed = offsets[t + 1] <= 8;
        std::vector<double> d;
        double ws = 0, ds = 0;
        for (int64_t i = offsets[t]; i < offsets[t + 1]; ++i) {
          const size_t k = size_t(i);
          m[k] = 0.9 * m[k] + 0.1 * g[k];
          v[k] = 0.999 * v[k] + 0.001 * g[k] * g[k];
          d.push_back((m[k] / bc1) / (std::sqrt(v[k]) / std::sqrt(bc2) + 1e-6) +
                      (decayed ? 0.1 * w[k] : 0.0));
          ws += w[k] * w[k];
          ds += d.back() * d.back();
        }
        double trust = 1.0;
        if (decayed && ws > 0 && ds > 0) trust = std::sqrt(ws) / std::sqrt(ds);
        if (decayed && clip) trust = std::min(trust, 1.0);
        for (int64_t i = offsets[t]; i < offsets[t + 1]; ++i)
          w[size_t(i)] -= 0.01 * trust * d[size_t(i - offsets[t])];
      }
      ASSERT_TRUE(test::all_close(flat.params, w, test::Tolerance{1e-5, 1e-7}))
          << "after step " << step;
    }
    EXPECT_EQ(lamb.state().size(), 3u);
  }
}

}  // namespace
}  // namespace hg
