// Dynamic loss scaling on the CPU backend (ops::unscale_grads_, ops::update_loss_scale_, and the
// optimizers' skip flag) against a float64 reference of torch.amp.GradScaler's rules written
// here: unscaling divides by the scale and records any inf/NaN; the update backs off on an
// overflow, grows after growth_interval clean steps, never grows to inf, and clears the flag.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;

// One element, odd, across the kernel's 65536-element chunks, ~1e6 with a tail.
const int64_t kSizes[] = {1, 3, 1001, 200003, (int64_t(1) << 20) + 3};

// ---- the float64 reference

struct RefScaler {
  double scale;
  bool found_inf = false;
  int64_t good_steps = 0;
};

std::vector<double> ref_unscale(const std::vector<double>& grads, RefScaler& s) {
  std::vector<double> out(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    out[i] = grads[i] / s.scale;
    // A value that does not fit f32 overflows in the kernel's f32 result.
    if (!std::isfinite(out[i]) || std::abs(out[i]) > double(FLT_MAX)) s.found_inf = true;
  }
  return out;
}

void ref_update(RefScaler& s, double growth, double backoff, int64_t interval) {
  if (s.found_inf) {
    s.scale *= backoff;
    s.good_steps = 0;
  } else if (++s.good_steps >= interval) {
    if (s.scale * growth <= double(FLT_MAX)) s.scale *= growth;  // the scale stays finite in f32
    s.good_steps = 0;
  }
  s.found_inf = false;
}

Tensor state_tensor(float scale, float found_inf, float good_steps) {
  return Tensor::from_vector<float>({scale, found_inf, good_steps}, {ops::kLossScaleState});
}

// The state against the reference: the scale after a few f32 roundings (one per update) of a
// product the reference keeps in double; the flag and the count exactly.
void expect_state(const Tensor& state, const RefScaler& r, int64_t updates) {
  const auto s = to_doubles(state);
  EXPECT_TRUE(all_close({s[0]}, {r.scale}, test::tolerance_for(DType::F32, updates + 1)))
      << "scale";
  EXPECT_EQ(s[1], r.found_inf ? 1.0 : 0.0) << "found_inf";
  EXPECT_EQ(s[2], double(r.good_steps)) << "good_steps";
}

// ---- unscaling

TEST(LossScale, UnscaleDividesByTheScale) {
  for (int64_t n : kSizes)
    for (float scale : {1024.0f, 3.0f, 0.37f}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " scale=" << scale);
      const auto g = test::round_f32(random_values(n, 1, -1000, 1000));
      Tensor grads = test::f32_tensor(g, {n});
      Tensor state = state_tensor(scale, 0.0f, 4.0f);
      RefScaler r{double(scale), false, 4};
      const auto want = ref_unscale(g, r);
      ops::unscale_grads_(grads, state);
      // A multiply by the f32 reciprocal: two roundings.
      EXPECT_TRUE(all_close(grads, want, test::tolerance_for(DType::F32, 2)));
      expect_state(state, r, 0);
    }
}

TEST(LossScale, NonFiniteGradientSetsFoundInf) {
  for (int64_t n : kSizes)
    for (int64_t where : {int64_t(0), n - 1, std::min<int64_t>(65536, n - 1), n / 2})
      for (double bad : {double(INFINITY), -double(INFINITY), double(NAN)}) {
        if (n > 100000 && !(bad > 0)) continue;  // the large sizes once, with +inf
        SCOPED_TRACE(testing::Message() << "n=" << n << " at=" << where << " value=" << bad);
        auto g = test::round_f32(random_values(n, 2, -10, 10));
        g[size_t(where)] = bad;
        Tensor grads = test::f32_tensor(g, {n});
        Tensor state = state_tensor(8.0f, 0.0f, 2.0f);
        RefScaler r{8.0, false, 2};
        auto want = ref_unscale(g, r);
        ops::unscale_grads_(grads, state);
        expect_state(state, r, 0);
        EXPECT_TRUE(r.found_inf);
        // Every other gradient is still unscaled.
        const auto got = to_doubles(grads);
        EXPECT_FALSE(std::isfinite(got[size_t(where)]));
        auto got_rest = got, want_rest = want;
        got_rest.erase(got_rest.begin() + where);
        want_rest.erase(want_rest.begin() + where);
        EXPECT_TRUE(all_close(got_rest, want_rest, test::tolerance_for(DType::F32, 2)));
      }
}

TEST(LossScale, OverflowOfTheUnscaledValueCounts) {
  // Finite scaled gradients whose unscaled value exceeds f32: found, as the reference says.
  const std::vector<double> g{3e38, 1.0};
  Tensor grads = test::f32_tensor(g, {2});
  Tensor state = state_tensor(0.5f, 0.0f, 0.0f);
  RefScaler r{0.5};
  ref_unscale(g, r);
  ops::unscale_grads_(grads, state);
  EXPECT_TRUE(r.found_inf);
  expect_state(state, r, 0);
}

TEST(LossScale, FoundInfIsNeverClearedByUnscaling) {
  Tensor state = state_tensor(4.0f, 1.0f, 0.0f);
  Tensor grads = test::f32_tensor({1.0, 2.0, 3.0}, {3});
  ops::unscale_grads_(grads, state);
  EXPECT_EQ(to_doubles(state), (std::vector<double>{4.0, 1.0, 0.0}));
  EXPECT_EQ(to_doubles(grads), (std::vector<double>{0.25, 0.5, 0.75}));
}

// ---- the scale update

// Steps through `overflow` (whether each step's gradients held an inf) on the backend and the
// reference together, comparing after every update.
void run_schedule(float scale, double growth, double backoff, int64_t interval,
                  const std::vector<bool>& overflow) {
  Tensor state = state_tensor(scale, 0.0f, 0.0f);
  RefScaler r{double(scale)};
  for (size_t step = 0; step < overflow.size(); ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    const std::vector<double> g{1.0, overflow[step] ? double(INFINITY) : -2.0};
    Tensor grads = test::f32_tensor(g, {2});
    ops::unscale_grads_(grads, state);
    ref_unscale(g, r);
    ops::update_loss_scale_(state, growth, backoff, interval);
    ref_update(r, growth, backoff, interval);
    expect_state(state, r, int64_t(step) + 1);
  }
}

TEST(LossScale, UpdateGrowsAfterTheIntervalAndBacksOffOnOverflow) {
  run_schedule(65536.0f, 2.0, 0.5, 3,
               {false, false, false, false, true, false, true, true, false, false, false, false,
                false, false, false});
  run_schedule(1024.0f, 2.0, 0.5, 1, {false, false, true, false, true, false});
  run_schedule(3.0f, 1.7, 0.31, 2, {false, false, true, false, false, false, true, true, false});
}

TEST(LossScale, KnownTransitions) {
  Tensor state = state_tensor(1024.0f, 0.0f, 1.0f);
  ops::update_loss_scale_(state, 2.0, 0.5, 2);  // second clean step: grow, reset the count
  EXPECT_EQ(to_doubles(state), (std::vector<double>{2048.0, 0.0, 0.0}));
  ops::update_loss_scale_(state, 2.0, 0.5, 2);  // one clean step
  EXPECT_EQ(to_doubles(state), (std::vector<double>{2048.0, 0.0, 1.0}));
  Tensor found = state_tensor(2048.0f, 1.0f, 1.0f);
  ops::update_loss_scale_(found, 2.0, 0.5, 2);  // overflow: back off, reset, clear the flag
  EXPECT_EQ(to_doubles(found), (std::vector<double>{1024.0, 0.0, 0.0}));
}

TEST(LossScale, NeverGrowsToInfinity) {
  Tensor state = state_tensor(FLT_MAX / 2, 0.0f, 0.0f);
  ops::update_loss_scale_(state, 4.0, 0.5, 1);
  const auto s = to_doubles(state);
  EXPECT_EQ(s[0], double(FLT_MAX / 2));
  EXPECT_EQ(s[2], 0.0) << "the count still restarts";
  run_schedule(FLT_MAX / 4, 2.0, 0.5, 1, {false, false, false, true, false});
}

// ---- the optimizers' skip flag (the found_inf element, read where the parameters live)

TEST(LossScale, SkipFlagLeavesTheOptimizerStateUntouched) {
  const int64_t n = 1001;
  SgdOptions so;
  so.momentum = 0.9;
  for (double flag : {1.0, double(NAN)}) {
    SCOPED_TRACE(testing::Message() << "skip=" << flag);
    Tensor p = test::f32_tensor(random_values(n, 3), {n});
    Tensor m = test::f32_tensor(random_values(n, 4), {n});
    Tensor v = test::f32_tensor(random_values(n, 5, 0, 1), {n});
    const Tensor g = test::f32_tensor(random_values(n, 6), {n});
    const auto p0 = to_doubles(p), m0 = to_doubles(m), v0 = to_doubles(v);
    const Tensor skip = Tensor::scalar(flag);
    ops::sgd_step(p, g, m, so, true, skip);
    Tensor count = Tensor::zeros({1});  // AdamW's applied-update count
    ops::advance_step_(count, skip);
    ops::adamw_step(p, g, m, v, AdamWOptions{}, count, skip);
    EXPECT_EQ(to_doubles(count), std::vector<double>{0.0}) << "a skipped update is not counted";
    EXPECT_EQ(to_doubles(p), p0);
    EXPECT_EQ(to_doubles(m), m0);
    EXPECT_EQ(to_doubles(v), v0);
  }
  // A zero flag (a view of the scaler state's found_inf) updates as without one.
  Tensor state = state_tensor(2.0f, 0.0f, 0.0f);
  Tensor p1 = test::f32_tensor(random_values(n, 7), {n}), p2 = p1.clone();
  Tensor m1 = Tensor::zeros({n}), m2 = Tensor::zeros({n});
  const Tensor g = test::f32_tensor(random_values(n, 8), {n});
  ops::sgd_step(p1, g, m1, so, true, state.narrow(0, 1, 1));
  ops::sgd_step(p2, g, m2, so, true);
  EXPECT_EQ(to_doubles(p1), to_doubles(p2));
  EXPECT_NE(to_doubles(p1), to_doubles(test::f32_tensor(random_values(n, 7), {n})));
}

// ---- validation

TEST(LossScale, ValidatesArguments) {
  Tensor grads = Tensor::zeros({4});
  Tensor bad_shape = Tensor::zeros({2});
  test::expect_invalid([&] { ops::unscale_grads_(grads, bad_shape); },
                       {"unscale_grads_", "loss-scale state"});
  Tensor state = state_tensor(1.0f, 0.0f, 0.0f);
  Tensor g64 = Tensor::zeros({4}, DType::F64);
  test::expect_invalid([&] { ops::unscale_grads_(g64, state); }, {"unscale_grads_", "gradients"});
  test::expect_invalid([&] { ops::update_loss_scale_(state, 0.5, 0.5, 1); },
                       {"update_loss_scale_", "growth"});
  test::expect_invalid([&] { ops::update_loss_scale_(state, 2.0, 0.0, 1); },
                       {"update_loss_scale_", "backoff"});
  test::expect_invalid([&] { ops::update_loss_scale_(state, 2.0, 0.5, 0); },
                       {"update_loss_scale_", "growth_interval"});
  Tensor state64 = Tensor::zeros({3}, DType::F64);
  test::expect_invalid([&] { ops::update_loss_scale_(state64, 2.0, 0.5, 1); },
                       {"update_loss_scale_"});
}

}  // namespace
}  // namespace hg
