// The GPU backend's fused optimizer updates (sgd_step, adamw_step with its device-side update
// number, advance_step_, the device-side skip flag), gradient clipping (clip_grads_) and
// dynamic loss scaling (unscale_grads_, update_loss_scale_) and LARS's segment_sum_squares and
// lars_adapt_grads_ against the CPU backend: several
// steps over sizes that exercise the float4 path, its tail and unaligned views.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/gpu.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#endif

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;

// One element, under one float4, odd, larger than a block's share, ~1e6 and a tail of 3.
const int64_t kSizes[] = {1, 3, 1001, 200003, (int64_t(1) << 20) + 3};
constexpr int kSteps = 4;

Device gpu0() { return Device::gpu(0); }

void poison_outputs() {
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);
#endif
}

// The same f32 operations per element on both backends, up to contraction into FMAs; momentum
// and Adam's moments carry differences forward over the steps: ~1e-6 relative.
test::Tolerance tol() { return test::tolerance_for(DType::F32, 10); }

// A flat f32 tensor on both devices with the same values. With `unaligned`, the GPU tensor is a
// view one element into its storage (contiguous, not 16-byte aligned: the scalar path).
struct Flat {
  Tensor gpu, cpu;
};
Flat flat(const std::vector<double>& values, bool unaligned = false) {
  const int64_t n = int64_t(values.size());
  const Tensor cpu = test::f32_tensor(values, {n});
  if (!unaligned) return {cpu.to(gpu0()), cpu.clone()};
  Tensor big = Tensor::zeros({n + 1}, DType::F32, gpu0());
  Tensor view = big.narrow(0, 1, n);
  view.copy_(cpu);
  return {view, cpu.clone()};
}

struct SgdCase {
  double momentum, dampening, weight_decay;
  bool nesterov;
};

TEST(GpuOptimizer, SgdMatchesCpuOverSeveralSteps) {
  HG_REQUIRE_GPU();
  poison_outputs();
  const SgdCase cases[] = {{0, 0, 0, false},        {0, 0, 0.1, false},   {0.9, 0, 0, false},
                           {0.9, 0.3, 0.01, false}, {0.9, 0, 0.05, true}, {0.5, 0, 0, true}};
  for (bool unaligned : {false, true})
    for (const SgdCase& c : cases)
      for (int64_t n : kSizes) {
        SCOPED_TRACE(testing::Message() << "momentum=" << c.momentum << " dampening=" << c.dampening
                                        << " wd=" << c.weight_decay << " nesterov=" << c.nesterov
                                        << " n=" << n << " unaligned=" << unaligned);
        SgdOptions o;
        o.lr = 0.05;
        o.momentum = c.momentum;
        o.dampening = c.dampening;
        o.weight_decay = c.weight_decay;
        o.nesterov = c.nesterov;
        Flat p = flat(random_values(n, 1), unaligned);
        // A stale buffer: the first step must ignore it.
        Flat m = c.momentum != 0 ? flat(random_values(n, 2), unaligned) : Flat{};
        for (int step = 0; step < kSteps; ++step) {
          const Flat g = flat(random_values(n, uint64_t(10 + step)), unaligned);
          ops::sgd_step(p.gpu, g.gpu, m.gpu, o, step == 0);
          ops::sgd_step(p.cpu, g.cpu, m.cpu, o, step == 0);
        }
        EXPECT_TRUE(all_close(p.gpu, to_doubles(p.cpu), tol()));
        if (c.momentum != 0) EXPECT_TRUE(all_close(m.gpu, to_doubles(m.cpu), tol()));
      }
}

TEST(GpuOptimizer, AdamWMatchesCpuOverSeveralSteps) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (bool unaligned : {false, true})
    for (double wd : {0.0, 0.01, 0.3})
      for (int64_t n : kSizes) {
        SCOPED_TRACE(testing::Message() << "wd=" << wd << " n=" << n << " unaligned=" << unaligned);
        AdamWOptions o;
        o.lr = 0.01;
        o.weight_decay = wd;
        Flat p = flat(random_values(n, 3), unaligned);
        Flat m = flat(std::vector<double>(size_t(n), 0.0), unaligned);
        Flat v = flat(std::vector<double>(size_t(n), 0.0), unaligned);
        Flat count = flat({0.0});  // the update number, on each device
        for (int64_t step = 1; step <= kSteps; ++step) {
          const Flat g = flat(random_values(n, uint64_t(20 + step)), unaligned);
          ops::advance_step_(count.gpu);
          ops::advance_step_(count.cpu);
          ops::adamw_step(p.gpu, g.gpu, m.gpu, v.gpu, o, count.gpu);
          ops::adamw_step(p.cpu, g.cpu, m.cpu, v.cpu, o, count.cpu);
        }
        EXPECT_EQ(count.gpu.to_vector<float>(), std::vector<float>{float(kSteps)});
        EXPECT_TRUE(all_close(p.gpu, to_doubles(p.cpu), tol()));
        EXPECT_TRUE(all_close(m.gpu, to_doubles(m.cpu), tol()));
        // v holds squares of O(1) gradients scaled by 1 - beta2 = 1e-3.
        EXPECT_TRUE(
            all_close(v.gpu, to_doubles(v.cpu), test::Tolerance{tol().rtol, tol().atol * 1e-3}));
      }
}

// The learning rate read from a device tensor: SGD's update is the options rate's bit for bit;
// AdamW's decay computed on the device from it follows the CPU.
TEST(GpuOptimizer, ADeviceRateReplacesTheOptionsRate) {
  HG_REQUIRE_GPU();
  const int64_t n = 200003;
  const Tensor lr = Tensor::from_vector<double>({0.03}, {1}).to(gpu0());
  SgdOptions s;
  s.momentum = 0.9;
  s.weight_decay = 0.05;
  s.nesterov = true;
  s.lr = 0.03;
  SgdOptions s_wrong = s;
  s_wrong.lr = 9.0;
  AdamWOptions w;
  w.lr = 0.03;
  w.weight_decay = 0.3;
  AdamWOptions w_wrong = w;
  w_wrong.lr = 2.0;
  Flat a = flat(random_values(n, 1)), b = flat(random_values(n, 1));
  Flat ma = flat(std::vector<double>(size_t(n), 0.0));
  Flat mb = flat(std::vector<double>(size_t(n), 0.0));
  Flat c = flat(random_values(n, 2));
  Flat m = flat(std::vector<double>(size_t(n), 0.0)), v = flat(std::vector<double>(size_t(n), 0.0));
  Flat count = flat({0.0});
  const Tensor lr_cpu = Tensor::from_vector<double>({0.03}, {1});
  for (int step = 0; step < kSteps; ++step) {
    const Flat g = flat(random_values(n, uint64_t(30 + step)));
    ops::sgd_step(a.gpu, g.gpu, ma.gpu, s, step == 0);
    ops::sgd_step(b.gpu, g.gpu, mb.gpu, s_wrong, step == 0, Tensor(), lr);
    ops::advance_step_(count.gpu);
    ops::advance_step_(count.cpu);
    ops::adamw_step(c.gpu, g.gpu, m.gpu, v.gpu, w_wrong, count.gpu, Tensor(), lr);
    ops::adamw_step(c.cpu, g.cpu, m.cpu, v.cpu, w_wrong, count.cpu, Tensor(), lr_cpu);
  }
  EXPECT_EQ(b.gpu.to_vector<float>(), a.gpu.to_vector<float>());
  EXPECT_TRUE(all_close(c.gpu, to_doubles(c.cpu), tol()));
}

TEST(GpuOptimizer, NonzeroSkipFlagLeavesEverythingUntouched) {
  HG_REQUIRE_GPU();
  const int64_t n = 100003;
  SgdOptions so;
  so.momentum = 0.9;
  so.weight_decay = 0.01;
  AdamWOptions ao;
  for (double flag : {1.0, -3.0, double(INFINITY), double(NAN)}) {
    SCOPED_TRACE(testing::Message() << "skip=" << flag);
    const Tensor skip = Tensor::scalar(flag, DType::F32, gpu0());
    const Tensor g = flat(random_values(n, 4)).gpu;
    Tensor p = flat(random_values(n, 5)).gpu, m = flat(random_values(n, 6)).gpu;
    Tensor v = flat(random_values(n, 7, 0, 1)).gpu;
    const auto p0 = p.to_vector<float>(), m0 = m.to_vector<float>(), v0 = v.to_vector<float>();
    ops::sgd_step(p, g, m, so, false, skip);
    ops::sgd_step(p, g, m, so, true, skip);
    Tensor count = Tensor::scalar(2.0, DType::F32, gpu0()).reshape({1});
    ops::advance_step_(count, skip);
    ops::adamw_step(p, g, m, v, ao, count, skip);
    EXPECT_EQ(count.to_vector<float>(), std::vector<float>{2.0f})
        << "a skipped update is not counted";
    EXPECT_EQ(p.to_vector<float>(), p0);
    EXPECT_EQ(m.to_vector<float>(), m0);
    EXPECT_EQ(v.to_vector<float>(), v0);
  }
}

TEST(GpuOptimizer, ZeroSkipFlagUpdatesAsWithoutOne) {
  HG_REQUIRE_GPU();
  const int64_t n = 100003;
  const Tensor zero = Tensor::scalar(0.0, DType::F32, gpu0());
  const Tensor g = flat(random_values(n, 8)).gpu;
  SgdOptions so;
  so.momentum = 0.9;
  Tensor p1 = flat(random_values(n, 9)).gpu, p2 = p1.clone();
  const auto p0 = p1.to_vector<float>();
  Tensor m1 = Tensor::zeros({n}, DType::F32, gpu0()), m2 = m1.clone();
  ops::sgd_step(p1, g, m1, so, true, zero);
  ops::sgd_step(p2, g, m2, so, true);
  EXPECT_EQ(p1.to_vector<float>(), p2.to_vector<float>());
  EXPECT_EQ(m1.to_vector<float>(), m2.to_vector<float>());
  EXPECT_NE(p1.to_vector<float>(), p0) << "the step must have moved p";

  AdamWOptions ao;
  Tensor v1 = Tensor::zeros({n}, DType::F32, gpu0()), v2 = v1.clone();
  Tensor c1 = Tensor::zeros({1}, DType::F32, gpu0()), c2 = c1.clone();
  ops::advance_step_(c1, zero);
  ops::advance_step_(c2);
  EXPECT_EQ(c1.to_vector<float>(), std::vector<float>{1.0f});
  EXPECT_EQ(c2.to_vector<float>(), std::vector<float>{1.0f});
  ops::adamw_step(p1, g, m1, v1, ao, c1, zero);
  ops::adamw_step(p2, g, m2, v2, ao, c2);
  EXPECT_EQ(p1.to_vector<float>(), p2.to_vector<float>());
  EXPECT_EQ(v1.to_vector<float>(), v2.to_vector<float>());
}

TEST(GpuOptimizer, EmptyTensorsLaunchNothing) {
  HG_REQUIRE_GPU();
  Tensor p = Tensor::empty({0}, DType::F32, gpu0());
  Tensor m = Tensor::empty({0}, DType::F32, gpu0()), v = Tensor::empty({0}, DType::F32, gpu0());
  SgdOptions so;
  so.momentum = 0.9;
  ops::sgd_step(p, p, m, so, true);
  ops::adamw_step(p, p, m, v, AdamWOptions{}, Tensor::scalar(1.0, DType::F32, gpu0()));
  const Tensor ss = Tensor::scalar(4.0, DType::F32, gpu0());
  EXPECT_EQ(ops::clip_grads_(p, ss, 1.0).item(), 2.0) << "the norm is written for n = 0 too";
  Tensor state = Tensor::from_vector<float>({8.0f, 0.0f, 0.0f}, {3}).to(gpu0());
  ops::unscale_grads_(p, state);
  EXPECT_EQ(state.to_vector<float>(), (std::vector<float>{8.0f, 0.0f, 0.0f}));
}

TEST(GpuOptimizer, AdvanceStepMatchesCpu) {
  HG_REQUIRE_GPU();
  for (double flag : {0.0, 1.0, -3.0, double(INFINITY), double(NAN)})
    for (bool with_flag : {false, true}) {
      if (!with_flag && flag != 0.0) continue;
      SCOPED_TRACE(testing::Message() << "flag=" << flag << " with_flag=" << with_flag);
      Flat count = flat({41.0});
      const Flat skip = flat({flag});
      for (int k = 0; k < 3; ++k) {
        ops::advance_step_(count.gpu, with_flag ? skip.gpu : Tensor());
        ops::advance_step_(count.cpu, with_flag ? skip.cpu : Tensor());
      }
      EXPECT_EQ(count.gpu.to_vector<float>(), count.cpu.to_vector<float>());
      EXPECT_EQ(count.gpu.to_vector<float>()[0], !with_flag || flag == 0.0 ? 44.0f : 41.0f);
    }
}

TEST(GpuOptimizer, AdamWReadsTheUpdateNumberOnTheDevice) {
  HG_REQUIRE_GPU();
  poison_outputs();
  // Given moments at update numbers 1, 2, 7 and 1000: the bias corrections come from the count.
  const int64_t n = 100003;
  AdamWOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  for (double step : {1.0, 2.0, 7.0, 1000.0}) {
    SCOPED_TRACE(testing::Message() << "step=" << step);
    Flat p = flat(random_values(n, 40)), m = flat(random_values(n, 41));
    Flat v = flat(random_values(n, 42, 0, 0.01));
    const Flat g = flat(random_values(n, 43));
    const Flat count = flat({step});
    ops::adamw_step(p.gpu, g.gpu, m.gpu, v.gpu, o, count.gpu);
    ops::adamw_step(p.cpu, g.cpu, m.cpu, v.cpu, o, count.cpu);
    // One step: a few f32 roundings per element; the bias corrections may differ by the last
    // bit of their f32 rounding (device and host pow): within the same bound.
    EXPECT_TRUE(all_close(p.gpu, to_doubles(p.cpu), test::tolerance_for(DType::F32, 4)));
    EXPECT_TRUE(all_close(m.gpu, to_doubles(m.cpu), test::tolerance_for(DType::F32, 4)));
  }
}

// ---------------------------------------------------------------- gradient clipping

TEST(GpuClip, ClipGradsMatchesCpuExactlyFromTheSameSumOfSquares) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (bool unaligned : {false, true})
    for (int64_t n : kSizes) {
      const auto values = random_values(n, 50);
      const Tensor cpu_ss = ops::sum_squares(test::f32_tensor(values, {n}));
      const double norm = std::sqrt(cpu_ss.item());
      for (double max_norm : {0.01 * norm, 0.999 * norm, 2 * norm + 1e-3}) {
        SCOPED_TRACE(testing::Message()
                     << "n=" << n << " unaligned=" << unaligned << " max_norm=" << max_norm);
        Flat g = flat(values, unaligned);
        // The same f32 sum of squares on both devices: the double arithmetic of the
        // coefficient (sqrt, division: correctly rounded on both) and the one f32 multiply
        // give bit-identical gradients and norm.
        const Tensor gpu_ss = cpu_ss.to(gpu0());
        const Tensor gpu_norm = ops::clip_grads_(g.gpu, gpu_ss, max_norm);
        const Tensor cpu_norm = ops::clip_grads_(g.cpu, cpu_ss, max_norm);
        EXPECT_EQ(gpu_norm.device(), gpu0());
        EXPECT_EQ(gpu_norm.item(), cpu_norm.item());
        ASSERT_EQ(g.gpu.to_vector<float>(), g.cpu.to_vector<float>());
      }
    }
}

TEST(GpuClip, ClipGradsWithItsOwnSumOfSquaresMatchesCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (int64_t n : kSizes) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Flat g = flat(random_values(n, 51));
    const Tensor gpu_norm = ops::clip_grads_(g.gpu, ops::sum_squares(g.gpu), 0.5);
    const Tensor cpu_norm = ops::clip_grads_(g.cpu, ops::sum_squares(g.cpu), 0.5);
    // The GPU sums squares in f32 by a tree of ~n terms, the CPU in double: the sum's error
    // bound for n terms carries into the norm and the coefficient (halved by the sqrt).
    const test::Tolerance t = test::tolerance_for(DType::F32, n);
    EXPECT_TRUE(all_close(gpu_norm, to_doubles(cpu_norm), t));
    EXPECT_TRUE(all_close(g.gpu, to_doubles(g.cpu), t));
  }
}

TEST(GpuClip, NonFiniteNormLeavesGradientsUntouched) {
  HG_REQUIRE_GPU();
  for (double bad : {double(NAN), double(INFINITY)}) {
    SCOPED_TRACE(testing::Message() << "bad=" << bad);
    auto values = random_values(1001, 52);
    values[500] = bad;
    Flat g = flat(values);
    const auto before = g.gpu.to_vector<float>();
    const Tensor norm = ops::clip_grads_(g.gpu, ops::sum_squares(g.gpu), 0.1);
    EXPECT_FALSE(std::isfinite(norm.item()));
    const auto after = g.gpu.to_vector<float>();
    for (size_t i = 0; i < after.size(); ++i)
      if (i != 500) ASSERT_EQ(after[i], before[i]) << "element " << i;
  }
  // An inf sum of squares over finite gradients: the coefficient would be 0; nothing changes.
  Flat big = flat({1e30, 1e30, 1.0});
  const auto before = big.gpu.to_vector<float>();
  ops::clip_grads_(big.gpu, ops::sum_squares(big.gpu), 1.0);
  EXPECT_EQ(big.gpu.to_vector<float>(), before);
}

// ---------------------------------------------------------------- loss scaling

Flat state(float scale, float found_inf, float good_steps) {
  return flat({scale, found_inf, good_steps});
}

TEST(GpuLossScale, UnscaleMatchesCpuAndFlagsNonFinite) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (bool unaligned : {false, true})
    for (int64_t n : kSizes) {
      // Where a non-finite value is planted: none, the first, the last (a tail element when
      // n % 4 != 0) and the middle.
      for (int64_t bad : {int64_t(-1), int64_t(0), n - 1, n / 2})
        for (double bad_value : {double(INFINITY), double(-INFINITY), double(NAN)}) {
          if (bad < 0 && bad_value != double(INFINITY)) continue;  // one clean run
          SCOPED_TRACE(testing::Message() << "n=" << n << " unaligned=" << unaligned
                                          << " bad=" << bad << " value=" << bad_value);
          auto values = random_values(n, 11, -2048, 2048);
          if (bad >= 0) values[size_t(bad)] = bad_value;
          Flat g = flat(values, unaligned);
          Flat s = state(1024.0f, 0.0f, 5.0f);
          ops::unscale_grads_(g.gpu, s.gpu);
          ops::unscale_grads_(g.cpu, s.cpu);
          // One f32 multiply by the same f32 reciprocal: bit-identical.
          const auto got = g.gpu.to_vector<float>(), want = g.cpu.to_vector<float>();
          for (int64_t i = 0; i < n; ++i)
            if (i != bad) ASSERT_EQ(got[size_t(i)], want[size_t(i)]) << "element " << i;
          if (bad >= 0) EXPECT_FALSE(std::isfinite(got[size_t(bad)]));
          EXPECT_EQ(s.gpu.to_vector<float>(), s.cpu.to_vector<float>());
          EXPECT_EQ(s.gpu.to_vector<float>()[1], bad >= 0 ? 1.0f : 0.0f);
          // Finite gradients afterwards never clear the flag.
          Flat g2 = flat(random_values(n, 12), unaligned);
          ops::unscale_grads_(g2.gpu, s.gpu);
          EXPECT_EQ(s.gpu.to_vector<float>()[1], bad >= 0 ? 1.0f : 0.0f);
        }
    }
}

TEST(GpuLossScale, UnscaleOverflowToInfIsFound) {
  HG_REQUIRE_GPU();
  // A tiny scale turns large finite gradients into inf: that counts as found.
  Flat g = flat({1e30, 1.0, -2.0});
  Flat s = state(1e-10f, 0.0f, 0.0f);
  ops::unscale_grads_(g.gpu, s.gpu);
  EXPECT_EQ(s.gpu.to_vector<float>()[1], 1.0f);
}

// Drives both backends through the same sequence of steps (found-inf or not, set by unscaling
// gradients that do or do not hold an inf) and requires bit-identical states after each.
void expect_same_transitions(float scale, double growth, double backoff, int64_t interval,
                             const std::vector<bool>& overflow) {
  Flat s = state(scale, 0.0f, 0.0f);
  for (size_t step = 0; step < overflow.size(); ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    Flat g = flat({1.0, overflow[step] ? double(INFINITY) : 2.0, 3.0});
    ops::unscale_grads_(g.gpu, s.gpu);
    ops::unscale_grads_(g.cpu, s.cpu);
    ops::update_loss_scale_(s.gpu, growth, backoff, interval);
    ops::update_loss_scale_(s.cpu, growth, backoff, interval);
    ASSERT_EQ(s.gpu.to_vector<float>(), s.cpu.to_vector<float>());
    ASSERT_EQ(s.gpu.to_vector<float>()[1], 0.0f) << "found_inf is cleared by the update";
  }
}

TEST(GpuLossScale, UpdateTransitionsMatchCpuExactly) {
  HG_REQUIRE_GPU();
  // Growth after `interval` clean steps, back-off on inf (resetting the count), interval 1.
  expect_same_transitions(65536.0f, 2.0, 0.5, 3,
                          {false, false, false, false, true, false, true, true, false, false, false,
                           false, false, false, false});
  expect_same_transitions(1024.0f, 2.0, 0.5, 1, {false, false, true, false, true, false});
  // Factors that are not powers of two: the double arithmetic must round the same way.
  expect_same_transitions(3.0f, 1.7, 0.31, 2,
                          {false, false, true, false, false, false, true, true, false, false});
  // Never grows to inf.
  expect_same_transitions(FLT_MAX / 2, 4.0, 0.5, 1, {false, false, false});
}

TEST(GpuLossScale, FoundInfSkipsTheOptimizerStepOnTheDevice) {
  HG_REQUIRE_GPU();
  // The real wiring: the skip flag is a view of the scaler state's found_inf element.
  const int64_t n = 1001;
  Tensor st = state(256.0f, 0.0f, 0.0f).gpu;
  const Tensor found_inf = st.narrow(0, 1, 1);
  SgdOptions o;
  o.momentum = 0.9;
  Tensor p = flat(random_values(n, 13)).gpu, m = Tensor::zeros({n}, DType::F32, gpu0());
  const auto p0 = p.to_vector<float>();

  auto bad = random_values(n, 14);
  bad[7] = double(NAN);
  Tensor g = flat(bad).gpu;
  ops::unscale_grads_(g, st);
  ops::sgd_step(p, g, m, o, true, found_inf);
  EXPECT_EQ(p.to_vector<float>(), p0) << "a step with inf/NaN gradients must be skipped";
  ops::update_loss_scale_(st, 2.0, 0.5, 100);
  EXPECT_EQ(st.to_vector<float>(), (std::vector<float>{128.0f, 0.0f, 0.0f}));

  Tensor g2 = flat(random_values(n, 15)).gpu;
  ops::unscale_grads_(g2, st);
  ops::sgd_step(p, g2, m, o, true, found_inf);
  EXPECT_NE(p.to_vector<float>(), p0) << "a clean step must update";
}

// LARS's two ops over segments of 0, 3, 1001, 2^20 + 3 and 1 elements (one with zero
// weights): sums within double-accumulation rounding, the adapted gradients within f32's.
TEST(GpuLars, SegmentSumsAndAdaptedGradientsMatchCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  const std::vector<int64_t> ends{0, 0, 3, 1004, 1004 + (int64_t(1) << 20) + 3};
  std::vector<int64_t> offsets = ends;
  offsets.push_back(offsets.back() + 1);
  const int64_t n = offsets.back();
  std::vector<double> w = random_values(n, 41), g = random_values(n, 42, -0.01, 0.01);
  for (int64_t i = offsets[1]; i < offsets[2]; ++i) w[size_t(i)] = 0.0;
  const Tensor off_cpu = Tensor::from_vector(offsets, {int64_t(offsets.size())});
  const Tensor off_gpu = off_cpu.to(gpu0());
  const Flat p = flat(w), grads = flat(g);
  const Tensor w_gpu = ops::segment_sum_squares(p.gpu, off_gpu);
  const Tensor w_cpu = ops::segment_sum_squares(p.cpu, off_cpu);
  EXPECT_TRUE(all_close(w_gpu.to(Device::cpu()), to_doubles(w_cpu), {1e-6, 0}));
  const Tensor g_gpu = ops::segment_sum_squares(grads.gpu, off_gpu);
  const Tensor g_cpu = ops::segment_sum_squares(grads.cpu, off_cpu);
  EXPECT_TRUE(all_close(g_gpu.to(Device::cpu()), to_doubles(g_cpu), {1e-6, 0}));
  for (const bool clip : {false, true}) {
    const LarsOptions o{.trust_coeff = 0.001, .eps = 1e-8, .trust_clip = clip};
    const Tensor lr = Tensor::from_vector<double>({0.2}, {1});
    Tensor on_gpu = grads.gpu.clone(), on_cpu = grads.cpu.clone();
    // The CPU's sums on both: the adaptation alone is compared.
    ops::lars_adapt_grads_(on_gpu, p.gpu, off_gpu, w_cpu.to(gpu0()), g_cpu.to(gpu0()), 5e-4, o,
                           lr.to(gpu0()));
    ops::lars_adapt_grads_(on_cpu, p.cpu, off_cpu, w_cpu, g_cpu, 5e-4, o, lr);
    EXPECT_TRUE(all_close(on_gpu.to(Device::cpu()), to_doubles(on_cpu), tol())) << clip;
  }
}

// lamb_direction over several steps, written over the gradients as optim::Lamb does: the GPU
// kernel against the CPU, sizes as the other updates'.
TEST(GpuLars, LambDirectionMatchesCpuOverSeveralSteps) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (const int64_t n : kSizes) {
    const Flat p = flat(random_values(n, 81));
    Flat m = flat(std::vector<double>(size_t(n), 0.0)),
         v = flat(std::vector<double>(size_t(n), 0.0));
    AdamWOptions o;
    o.eps = 1e-6;
    o.weight_decay = 0.01;
    for (int step = 1; step <= kSteps; ++step) {
      Flat g = flat(random_values(n, uint64_t(82 + step)));
      const Tensor t = Tensor::from_vector<float>({float(step)}, {1});
      ops::lamb_direction(g.gpu, p.gpu, g.gpu, m.gpu, v.gpu, o, t.to(gpu0()));
      ops::lamb_direction(g.cpu, p.cpu, g.cpu, m.cpu, v.cpu, o, t);
      ASSERT_TRUE(all_close(g.gpu.to(Device::cpu()), to_doubles(g.cpu), tol()))
          << "n " << n << " step " << step;
      ASSERT_TRUE(all_close(v.gpu.to(Device::cpu()), to_doubles(v.cpu), tol()));
    }
  }
}

}  // namespace
}  // namespace hg
