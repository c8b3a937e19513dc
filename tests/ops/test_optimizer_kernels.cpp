// The fused sgd_step / adamw_step kernels against float64 references of torch.optim.SGD and
// torch.optim.AdamW, over three steps and every option combination; advance_step_, the
// applied-update count AdamW keeps next to its state; LARS's segment_sum_squares and
// lars_adapt_grads_ against float64 (empty segments, zero norms, the trust clip).
#include <gtest/gtest.h>

#include <cmath>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/reference_dense.h"

namespace hg {
namespace {

using test::all_close;
using test::f32_tensor;
using test::random_values;
using test::round_f32;
using test::to_doubles;
namespace ref = test::ref;

// One element, odd, and larger than the parallel grain.
const int64_t kSizes[] = {1, 1001, 200003};

// Each step is a handful of f32 roundings per element and three steps compound them (momentum
// and Adam's moments carry errors forward): about ten roundings, treated as a length-10 sum.
test::Tolerance tol() { return test::tolerance_for(DType::F32, 10); }

struct SgdCase {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

TEST(SgdKernel, MatchesReferenceOverThreeSteps) {
  const SgdCase cases[] = {{0, 0, 0, false},        {0, 0, 0.1, false},   {0.9, 0, 0, false},
                           {0.9, 0.3, 0.01, false}, {0.9, 0, 0.05, true}, {0.5, 0, 0, true}};
  for (const SgdCase& c : cases)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message()
                   << "momentum=" << c.momentum << " dampening=" << c.dampening
                   << " wd=" << c.weight_decay << " nesterov=" << c.nesterov << " n=" << n);
      SgdOptions o;
      o.lr = 0.05;
      o.momentum = c.momentum;
      o.dampening = c.dampening;
      o.weight_decay = c.weight_decay;
      o.nesterov = c.nesterov;
      ref::SgdState r{round_f32(random_values(n, 1)), {}, false};
      Tensor params = f32_tensor(r.param, {n});
      Tensor momentum = c.momentum != 0 ? Tensor::zeros({n}) : Tensor();
      for (int step = 0; step < 3; ++step) {
        const auto g = round_f32(random_values(n, uint64_t(10 + step)));
        ops::sgd_step(params, f32_tensor(g, {n}), momentum, o, step == 0);
        ref::sgd_step(r, g, o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov);
      }
      EXPECT_TRUE(all_close(params, r.param, tol()));
      if (c.momentum != 0) EXPECT_TRUE(all_close(momentum, r.momentum, tol()));
    }
}

TEST(SgdKernel, FirstStepIgnoresStaleBuffer) {
  // On the first step the buffer becomes the gradient, whatever it held (PyTorch creates it).
  Tensor params = Tensor::from_vector<float>({1.0f}, {1});
  Tensor momentum = Tensor::from_vector<float>({100.0f}, {1});
  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.dampening = 0.5;  // not applied on the first step either
  ops::sgd_step(params, Tensor::from_vector<float>({2.0f}, {1}), momentum, o, true);
  EXPECT_FLOAT_EQ(momentum.to_vector<float>()[0], 2.0f);
  EXPECT_FLOAT_EQ(params.to_vector<float>()[0], 0.8f);
}

TEST(AdamWKernel, MatchesReferenceOverThreeSteps) {
  for (double wd : {0.0, 0.01, 0.3})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << "wd=" << wd << " n=" << n);
      AdamWOptions o;
      o.lr = 0.01;
      o.weight_decay = wd;
      ref::AdamWState r{round_f32(random_values(n, 2)), {}, {}, 0};
      Tensor params = f32_tensor(r.param, {n});
      Tensor m = Tensor::zeros({n}), v = Tensor::zeros({n});
      Tensor count = Tensor::zeros({1});  // the update number, as AdamW keeps it
      for (int64_t step = 1; step <= 3; ++step) {
        const auto g = round_f32(random_values(n, uint64_t(20 + step)));
        ops::advance_step_(count);
        ops::adamw_step(params, f32_tensor(g, {n}), m, v, o, count);
        ref::adamw_step(r, g, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
      }
      EXPECT_TRUE(all_close(params, r.param, tol()));
      EXPECT_TRUE(all_close(m, r.m, tol()));
      // v holds squares of O(1) gradients scaled by 1 - beta2 = 1e-3: compare relative to that.
      EXPECT_TRUE(all_close(v, r.v, test::Tolerance{tol().rtol, tol().atol * 1e-3}));
    }
}

Tensor step_tensor(double step) { return Tensor::from_vector<float>({float(step)}, {1}); }

TEST(AdamWKernel, BiasCorrectionsUseTheGivenUpdateNumber) {
  // Update number 5 from given moments: the reference starts at step 4 with the same state.
  const int64_t n = 1001;
  AdamWOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  ref::AdamWState r{round_f32(random_values(n, 30)), round_f32(random_values(n, 31)),
                    round_f32(random_values(n, 32, 0, 0.01)), 4};
  Tensor params = f32_tensor(r.param, {n}), m = f32_tensor(r.m, {n}), v = f32_tensor(r.v, {n});
  const auto g = round_f32(random_values(n, 33));
  ops::adamw_step(params, f32_tensor(g, {n}), m, v, o, step_tensor(5));
  ref::adamw_step(r, g, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  ASSERT_EQ(r.step, 5);
  // One step: a handful of roundings per element.
  EXPECT_TRUE(all_close(params, r.param, test::tolerance_for(DType::F32, 4)));
  // The same state at update number 1 gives a different result: the count is really read.
  Tensor p1 = f32_tensor(round_f32(random_values(n, 30)), {n});
  Tensor m1 = f32_tensor(round_f32(random_values(n, 31)), {n});
  Tensor v1 = f32_tensor(round_f32(random_values(n, 32, 0, 0.01)), {n});
  ops::adamw_step(p1, f32_tensor(g, {n}), m1, v1, o, step_tensor(1));
  EXPECT_NE(to_doubles(p1), to_doubles(params));
}

TEST(AdamWKernel, UpdateNumberBelowOneIsAnError) {
  Tensor p = Tensor::zeros({4}), m = Tensor::zeros({4}), v = Tensor::zeros({4});
  const Tensor g = Tensor::from_vector<float>({1.0f, 1.0f, 1.0f, 1.0f}, {4});
  test::expect_invalid([&] { ops::adamw_step(p, g, m, v, AdamWOptions{}, step_tensor(0)); },
                       {"adamw_step", "at least 1", "advance_step_"});
  // A skipped update reads no count (the first fp16 steps are often skipped, at count 0).
  ops::adamw_step(p, g, m, v, AdamWOptions{}, step_tensor(0), Tensor::scalar(1.0));
  EXPECT_EQ(to_doubles(p), std::vector<double>(4, 0.0));
}

TEST(AdvanceStep, CountsUnlessSkipped) {
  // The float64 reference: count + 1 when there is no flag or it is 0, else count.
  struct Case {
    bool has_flag;
    double flag;
    double expected;
  };
  const Case cases[] = {{false, 0, 8},
                        {true, 0.0, 8},
                        {true, 1.0, 7},
                        {true, -3.0, 7},
                        {true, double(INFINITY), 7},
                        {true, double(NAN), 7}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "flag=" << (c.has_flag ? c.flag : -999));
    Tensor count = step_tensor(7);
    ops::advance_step_(count, c.has_flag ? Tensor::scalar(c.flag) : Tensor());
    EXPECT_EQ(to_doubles(count), std::vector<double>{c.expected});
  }
  // The count and the flag as elements of one state tensor (views), as a caller may keep them.
  Tensor state = Tensor::from_vector<float>({3.0f, 0.0f}, {2});
  Tensor count = state.narrow(0, 0, 1);
  ops::advance_step_(count, state.narrow(0, 1, 1));
  EXPECT_EQ(to_doubles(state), (std::vector<double>{4.0, 0.0}));
}

TEST(AdvanceStep, ValidatesOperands) {
  Tensor two = Tensor::zeros({2});
  test::expect_invalid([&] { ops::advance_step_(two); }, {"advance_step_", "step", "[2]"});
  Tensor f64 = Tensor::zeros({1}, DType::F64);
  test::expect_invalid([&] { ops::advance_step_(f64); }, {"advance_step_", "step", "f32"});
  Tensor count = Tensor::zeros({1});
  test::expect_invalid([&] { ops::advance_step_(count, Tensor::zeros({2})); },
                       {"advance_step_", "skip flag"});
  test::expect_invalid([&] { ops::advance_step_(count, Tensor::zeros({1}, DType::F64)); },
                       {"advance_step_", "skip flag"});
}

TEST(AdamWKernel, FirstStepMovesEachParameterByLr) {
  // With bias correction the first update is lr * g / (|g| + eps): lr in the direction of -g.
  Tensor params = Tensor::from_vector<float>({0.0f, 0.0f, 0.0f}, {3});
  Tensor m = Tensor::zeros({3}), v = Tensor::zeros({3});
  AdamWOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.0;
  ops::adamw_step(params, Tensor::from_vector<float>({3.0f, -0.5f, 1e-3f}, {3}), m, v, o,
                  step_tensor(1));
  const auto p = params.to_vector<float>();
  EXPECT_NEAR(p[0], -0.1, 1e-6);
  EXPECT_NEAR(p[1], 0.1, 1e-6);
  EXPECT_NEAR(p[2], -0.1 * 1e-3 / (1e-3 + 1e-8), 1e-6);
}

// A learning rate held in a tensor (a captured step reads it there) replaces the options' rate,
// in SGD's update and in AdamW's step size and decoupled decay alike.
TEST(OptimizerKernels, ATensorRateReplacesTheOptionsRate) {
  const int64_t n = 1001;
  const Tensor lr = Tensor::from_vector<double>({0.05}, {1});
  SgdOptions s;
  s.momentum = 0.9;
  s.weight_decay = 0.01;
  s.nesterov = true;
  SgdOptions s_wrong = s;
  s.lr = 0.05;
  s_wrong.lr = 7.0;
  Tensor a = f32_tensor(random_values(n, 1), {n}), b = a.clone();
  Tensor ma = Tensor::zeros({n}), mb = Tensor::zeros({n});
  AdamWOptions w;
  w.weight_decay = 0.3;
  AdamWOptions w_wrong = w;
  w.lr = 0.05;
  w_wrong.lr = 3.0;
  Tensor c = a.clone(), d = a.clone();
  Tensor m1 = Tensor::zeros({n}), v1 = Tensor::zeros({n}), m2 = Tensor::zeros({n}),
         v2 = Tensor::zeros({n});
  for (int step = 0; step < 3; ++step) {
    const Tensor g = f32_tensor(random_values(n, uint64_t(10 + step)), {n});
    ops::sgd_step(a, g, ma, s, step == 0);
    ops::sgd_step(b, g, mb, s_wrong, step == 0, Tensor(), lr);
    ops::adamw_step(c, g, m1, v1, w, step_tensor(step + 1));
    ops::adamw_step(d, g, m2, v2, w_wrong, step_tensor(step + 1), Tensor(), lr);
  }
  EXPECT_EQ(b.to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(d.to_vector<float>(), c.to_vector<float>());
  test::expect_invalid([&] { ops::sgd_step(a, a, ma, s, false, Tensor(), Tensor::zeros({1})); },
                       {"sgd_step", "lr", "f64"});
  test::expect_invalid(
      [&] {
        ops::adamw_step(c, c, m1, v1, w, step_tensor(1), Tensor(), Tensor::zeros({2}, DType::F64));
      },
      {"adamw_step", "lr", "[2]"});
}

TEST(OptimizerKernels, ValidateOperands) {
  Tensor p = Tensor::zeros({4});
  Tensor m = Tensor::zeros({3});
  SgdOptions o;
  o.momentum = 0.9;
  EXPECT_THROW(ops::sgd_step(p, Tensor::zeros({4}), m, o, true), Error);  // shape mismatch
  o.nesterov = true;
  o.dampening = 0.1;
  Tensor m4 = Tensor::zeros({4});
  EXPECT_THROW(ops::sgd_step(p, Tensor::zeros({4}), m4, o, true), Error);  // nesterov + dampening
  Tensor v = Tensor::zeros({4});
  EXPECT_THROW(ops::adamw_step(p, Tensor::zeros({4}), m4, v, AdamWOptions{}, step_tensor(0)),
               Error);  // update number 0
  Tensor p64 = Tensor::zeros({4}, DType::F64);
  EXPECT_THROW(ops::adamw_step(p64, Tensor::zeros({4}), m4, v, AdamWOptions{}, step_tensor(1)),
               Error);
  // The update number: one f32 element, defined.
  test::expect_invalid(
      [&] { ops::adamw_step(p, Tensor::zeros({4}), m4, v, AdamWOptions{}, Tensor()); },
      {"adamw_step", "step", "undefined"});
  test::expect_invalid(
      [&] { ops::adamw_step(p, Tensor::zeros({4}), m4, v, AdamWOptions{}, Tensor::zeros({2})); },
      {"adamw_step", "step", "[2]"});
  test::expect_invalid(
      [&] {
        ops::adamw_step(p, Tensor::zeros({4}), m4, v, AdamWOptions{},
                        Tensor::from_vector<double>({1.0}, {1}));
      },
      {"adamw_step", "step", "f32"});
}

// Segments of 0, 1, 5, 0, 70,001 and 3 elements.
const std::vector<int64_t> kOffsets{0, 0, 1, 6, 6, 70007, 70010};

TEST(SegmentSumSquares, MatchesFloat64PerSegment) {
  const std::vector<double> x = round_f32(random_values(kOffsets.back(), 31, -2.0, 2.0));
  const Tensor sums = ops::segment_sum_squares(
      f32_tensor(x, {kOffsets.back()}), Tensor::from_vector(kOffsets, {int64_t(kOffsets.size())}));
  ASSERT_EQ(sums.shape(), (Shape{int64_t(kOffsets.size()) - 1}));
  const std::vector<double> got = to_doubles(sums);
  for (size_t s = 0; s + 1 < kOffsets.size(); ++s) {
    double want = 0;
    for (int64_t i = kOffsets[s]; i < kOffsets[s + 1]; ++i) want += x[size_t(i)] * x[size_t(i)];
    EXPECT_NEAR(got[s], want, 1e-7 * want) << "segment " << s;
  }
}

// grads = (g + wd w) * trust per segment, trust = c |w| / (|g| + wd |w| + eps), 1 where a norm
// is 0, min(trust / lr, 1) with the clip.
TEST(LarsAdaptGrads, MatchesFloat64PerSegment) {
  const int64_t n = kOffsets.back();
  std::vector<double> w = round_f32(random_values(n, 32)),
                      g = round_f32(random_values(n, 33, -0.1, 0.1));
  for (int64_t i = kOffsets[2]; i < kOffsets[3]; ++i) w[size_t(i)] = 0.0;      // |w| = 0: trust 1
  for (int64_t i = kOffsets[6 - 1]; i < kOffsets[6]; ++i) g[size_t(i)] = 0.0;  // |g| = 0
  const Tensor offsets = Tensor::from_vector(kOffsets, {int64_t(kOffsets.size())});
  for (const bool clip : {false, true}) {
    SCOPED_TRACE(clip ? "trust clip" : "no clip");
    const LarsOptions o{.trust_coeff = 0.02, .eps = 1e-8, .trust_clip = clip};
    const double wd = 0.01, lr = 0.05;
    const Tensor params = f32_tensor(w, {n});
    Tensor grads = f32_tensor(g, {n});
    ops::lars_adapt_grads_(grads, params, offsets, ops::segment_sum_squares(params, offsets),
                           ops::segment_sum_squares(grads, offsets), wd, o,
                           Tensor::from_vector<double>({lr}, {1}));
    std::vector<double> want(static_cast<size_t>(n));
    for (size_t s = 0; s + 1 < kOffsets.size(); ++s) {
      double ws = 0, gs = 0;
      for (int64_t i = kOffsets[s]; i < kOffsets[s + 1]; ++i) {
        ws += w[size_t(i)] * w[size_t(i)];
        gs += g[size_t(i)] * g[size_t(i)];
      }
      const double wn = std::sqrt(ws), gn = std::sqrt(gs);
      double trust = wn > 0 && gn > 0 ? 0.02 * wn / (gn + wd * wn + 1e-8) : 1.0;
      if (clip) trust = std::min(trust / lr, 1.0);
      for (int64_t i = kOffsets[s]; i < kOffsets[s + 1]; ++i)
        want[size_t(i)] = (g[size_t(i)] + wd * w[size_t(i)]) * trust;
    }
    EXPECT_TRUE(all_close(grads, want, test::tolerance_for(DType::F32, 4)));
  }
}

TEST(LarsAdaptGrads, BadOperandsAreRefusedNamingThem) {
  Tensor g = Tensor::zeros({4});
  const Tensor p = Tensor::zeros({4});
  const Tensor two = Tensor::zeros({2});
  const Tensor lr = Tensor::from_vector<double>({0.1}, {1});
  auto offsets = [](std::vector<int64_t> v) {
    const int64_t n = int64_t(v.size());
    return Tensor::from_vector(v, {n});
  };
  test::expect_invalid(
      [&] {
        ops::segment_sum_squares(p, offsets({0, 3}));
      },
      {"segment_sum_squares", "from 0 to the length 4"});
  test::expect_invalid(
      [&] {
        ops::segment_sum_squares(p, offsets({0, 3, 2, 4}));
      },
      {"segment_sum_squares", "must not decrease"});
  test::expect_invalid([&] { ops::segment_sum_squares(p, Tensor::zeros({3})); },
                       {"segment_sum_squares", "offsets"});
  test::expect_invalid(
      [&] {
        ops::lars_adapt_grads_(g, p, offsets({0, 2, 4}), two, Tensor::zeros({3}), 0.1, {}, lr);
      },
      {"lars_adapt_grads_", "[2]"});
  test::expect_invalid(
      [&] {
        ops::lars_adapt_grads_(g, p, offsets({0, 2, 4}), two, two, 0.1, {.trust_coeff = 0}, lr);
      },
      {"lars_adapt_grads_", "trust_coeff > 0"});
  test::expect_invalid(
      [&] {
        ops::lars_adapt_grads_(g, p, offsets({0, 2, 4}), two, two, 0.1, {.trust_clip = true},
                               Tensor());
      },
      {"lars_adapt_grads_", "trust_clip"});
}

// lamb_direction over three steps against float64: the moments, and d = m^ / (sqrt(v^) + eps) +
// wd w; a set skip flag changes nothing.
TEST(LambDirection, MatchesFloat64AndASkipChangesNothing) {
  for (const int64_t n : kSizes) {
    const std::vector<double> w = round_f32(random_values(n, 71));
    const Tensor params = f32_tensor(w, {n});
    Tensor m = Tensor::zeros({n}), v = Tensor::zeros({n}), out = Tensor::zeros({n});
    std::vector<double> rm(size_t(n), 0.0), rv(size_t(n), 0.0);
    AdamWOptions o;
    o.eps = 1e-6;
    o.weight_decay = 0.05;
    for (int step = 1; step <= 3; ++step) {
      const std::vector<double> g = round_f32(random_values(n, uint64_t(72 + step)));
      ops::lamb_direction(out, params, f32_tensor(g, {n}), m, v, o, step_tensor(step));
      const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.999, step);
      std::vector<double> want(static_cast<size_t>(n));
      for (size_t i = 0; i < size_t(n); ++i) {
        rm[i] = 0.9 * rm[i] + 0.1 * g[i];
        rv[i] = 0.999 * rv[i] + 0.001 * g[i] * g[i];
        want[i] = (rm[i] / bc1) / (std::sqrt(rv[i]) / std::sqrt(bc2) + 1e-6) + 0.05 * w[i];
      }
      ASSERT_TRUE(all_close(out, want, tol())) << "n " << n << " step " << step;
      ASSERT_TRUE(all_close(m, rm, tol()));
    }
    const std::vector<double> before = to_doubles(m), out_before = to_doubles(out);
    const Tensor skip = Tensor::from_vector<float>({1.0f}, {1});
    ops::lamb_direction(out, params, f32_tensor(random_values(n, 79), {n}), m, v, o, step_tensor(4),
                        skip);
    EXPECT_EQ(to_doubles(m), before);
    EXPECT_EQ(to_doubles(out), out_before);
  }
  Tensor p = Tensor::zeros({4}), g = Tensor::zeros({4}), m = Tensor::zeros({4});
  Tensor v = Tensor::zeros({4});
  test::expect_invalid([&] { ops::lamb_direction(p, p, g, m, v, AdamWOptions{}, step_tensor(0)); },
                       {"lamb_direction", "at least 1"});
}

}  // namespace
}  // namespace hg
