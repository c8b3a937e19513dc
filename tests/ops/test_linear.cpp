// linear / linear_backward on the CPU against the float64 reference, and the reference's
// gradients against finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "hourglass/base/parallel.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/reference_dense.h"

namespace hg {
namespace {

using test::all_close;
using test::f32_tensor;
using test::random_values;
using test::round_f32;
using test::tolerance_for;
namespace ref = test::ref;

struct LinearShape {
  int64_t n, in, out;
};

// Odd sizes, batch 1, a single feature, and the two shapes the models use.
const LinearShape kShapes[] = {{1, 1, 1},  {1, 7, 3},   {3, 5, 2},     {17, 33, 9},
                               {2, 1, 40}, {5, 129, 1}, {64, 512, 10}, {31, 300, 65}};

TEST(Linear, ReferenceGradientsMatchFiniteDifferences) {
  // L = sum_ij y_ij * r_ij, so dL/dy = r; checks ref::linear_backward in float64.
  const int64_t n = 3, in = 4, out = 5;
  const auto x = random_values(n * in, 1), w = random_values(out * in, 2),
             b = random_values(out, 3), r = random_values(n * out, 4);
  const auto loss = [&](const ref::Vec& xv, const ref::Vec& wv, const ref::Vec& bv) {
    const auto y = ref::linear(xv, wv, bv, n, in, out);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
    return s;
  };
  const auto g = ref::linear_backward(r, x, w, n, in, out);
  const test::Tolerance fd{1e-7,
                           1e-7};  // central differences of a bilinear form: exact up to rounding
  EXPECT_TRUE(all_close(ref::numeric_gradient([&](const ref::Vec& v) { return loss(v, w, b); }, x),
                        g.dx, fd));
  EXPECT_TRUE(all_close(ref::numeric_gradient([&](const ref::Vec& v) { return loss(x, v, b); }, w),
                        g.dw, fd));
  EXPECT_TRUE(all_close(ref::numeric_gradient([&](const ref::Vec& v) { return loss(x, w, v); }, b),
                        g.db, fd));
}

TEST(Linear, ForwardMatchesReference) {
  for (const auto& s : kShapes) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(testing::Message()
                   << "n=" << s.n << " in=" << s.in << " out=" << s.out << " bias=" << with_bias);
      const auto x = round_f32(random_values(s.n * s.in, 10));
      const auto w = round_f32(random_values(s.out * s.in, 11));
      const auto b = with_bias ? round_f32(random_values(s.out, 12)) : ref::Vec{};
      const Tensor bias = with_bias ? f32_tensor(b, {s.out}) : Tensor();
      const Tensor y = ops::linear(f32_tensor(x, {s.n, s.in}), f32_tensor(w, {s.out, s.in}), bias);
      EXPECT_EQ(y.shape(), (Shape{s.n, s.out}));
      // Each output is a dot product of `in` terms plus the bias.
      EXPECT_TRUE(all_close(y, ref::linear(x, w, b, s.n, s.in, s.out),
                            tolerance_for(DType::F32, s.in + 1)));
    }
  }
}

TEST(Linear, BackwardMatchesReference) {
  for (const auto& s : kShapes) {
    SCOPED_TRACE(testing::Message() << "n=" << s.n << " in=" << s.in << " out=" << s.out);
    const auto x = round_f32(random_values(s.n * s.in, 20));
    const auto w = round_f32(random_values(s.out * s.in, 21));
    const auto dy = round_f32(random_values(s.n * s.out, 22));
    const auto g = ref::linear_backward(dy, x, w, s.n, s.in, s.out);
    const auto got = ops::linear_backward(f32_tensor(dy, {s.n, s.out}), f32_tensor(x, {s.n, s.in}),
                                          f32_tensor(w, {s.out, s.in}), true, InputGrad::Compute);
    ASSERT_TRUE(got.dx.defined() && got.dw.defined() && got.dbias.defined());
    EXPECT_EQ(got.dx.shape(), (Shape{s.n, s.in}));
    EXPECT_EQ(got.dw.shape(), (Shape{s.out, s.in}));
    EXPECT_EQ(got.dbias.shape(), (Shape{s.out}));
    // dx sums over the `out` outputs; dw and dbias over the batch of n rows.
    EXPECT_TRUE(all_close(got.dx, g.dx, tolerance_for(DType::F32, s.out)));
    EXPECT_TRUE(all_close(got.dw, g.dw, tolerance_for(DType::F32, s.n)));
    EXPECT_TRUE(all_close(got.dbias, g.db, tolerance_for(DType::F32, s.n)));
  }
}

TEST(Linear, BackwardSkipsInputGradAndBias) {
  const Tensor x = f32_tensor(random_values(8, 30), {2, 4});
  const Tensor w = f32_tensor(random_values(12, 31), {3, 4});
  const Tensor dy = f32_tensor(random_values(6, 32), {2, 3});
  const auto g = ops::linear_backward(dy, x, w, false, InputGrad::Skip);
  EXPECT_FALSE(g.dx.defined());
  EXPECT_FALSE(g.dbias.defined());
  EXPECT_TRUE(g.dw.defined());
}

TEST(Linear, NonContiguousInputIsHandled) {
  // ops.cpp makes inputs contiguous; a transposed view must give the same result.
  const int64_t n = 6, in = 5, out = 4;
  const auto x = round_f32(random_values(n * in, 40));
  const auto w = round_f32(random_values(out * in, 41));
  ref::Vec xt(x.size());  // x stored transposed [in, n]
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < in; ++k) xt[size_t(k * n + i)] = x[size_t(i * in + k)];
  const Tensor xview = f32_tensor(xt, {in, n}).permute({1, 0});
  const Tensor y = ops::linear(xview, f32_tensor(w, {out, in}), Tensor());
  EXPECT_TRUE(all_close(y, ref::linear(x, w, {}, n, in, out), tolerance_for(DType::F32, in)));
}

TEST(Linear, RepeatedCallsAreBitIdentical) {
  const Tensor x = f32_tensor(random_values(64 * 512, 50), {64, 512});
  const Tensor w = f32_tensor(random_values(10 * 512, 51), {10, 512});
  const Tensor b = f32_tensor(random_values(10, 52), {10});
  const auto y1 = ops::linear(x, w, b).to_vector<float>();
  const auto y2 = ops::linear(x, w, b).to_vector<float>();
  EXPECT_EQ(y1, y2);
}

TEST(Linear, DegenerateSizes) {
  // An empty batch gives empty outputs and zero weight gradients (oneDNN rejects zero sizes,
  // so the kernel must not call it).
  const Tensor w = f32_tensor(random_values(6, 70), {2, 3});
  const Tensor b = Tensor::from_vector<float>({0.5f, -1.5f}, {2});
  const Tensor x0 = Tensor::zeros({0, 3});
  EXPECT_EQ(ops::linear(x0, w, b).shape(), (Shape{0, 2}));
  const auto g0 = ops::linear_backward(Tensor::zeros({0, 2}), x0, w, true, InputGrad::Compute);
  EXPECT_EQ(g0.dx.shape(), (Shape{0, 3}));
  EXPECT_EQ(g0.dw.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(g0.dbias.to_vector<float>(), std::vector<float>(2, 0.0f));
  // No input features: every row is the bias.
  const Tensor y = ops::linear(Tensor::zeros({3, 0}), Tensor::zeros({2, 0}), b);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.5f, -1.5f, 0.5f, -1.5f, 0.5f, -1.5f}));
}

TEST(Linear, RejectsNonF32OnCpu) {
  const Tensor x = Tensor::zeros({2, 3}, DType::F64);
  const Tensor w = Tensor::zeros({4, 3}, DType::F64);
  try {
    ops::linear(x, w, Tensor());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.message().find("f64"), std::string::npos) << e.message();
  }
}

// Times forward + backward for the model shapes on one thread: the test machine is shared, and
// an oversubscribed OpenMP barrier can stall a multi-threaded call for a whole scheduler slice,
// which says nothing about the kernel. The bound is loose (best of several repetitions, ~1
// GFLOP/s) and only catches a pathological fallback such as a naive triple loop or a primitive
// rebuilt on every call.
TEST(Linear, ModelShapesAreFast) {
  const int saved_threads = num_threads();
  set_num_threads(1);
  for (const LinearShape s : {LinearShape{64, 512, 10}, LinearShape{256, 3136, 128}}) {
    const Tensor x = f32_tensor(random_values(s.n * s.in, 60), {s.n, s.in});
    const Tensor w = f32_tensor(random_values(s.out * s.in, 61), {s.out, s.in});
    const Tensor b = f32_tensor(random_values(s.out, 62), {s.out});
    const Tensor dy = f32_tensor(random_values(s.n * s.out, 63), {s.n, s.out});
    ops::linear(x, w, b);  // warm-up: primitive creation
    ops::linear_backward(dy, x, w, true, InputGrad::Compute);
    double best_ms = 1e30;
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      ops::linear(x, w, b);
      ops::linear_backward(dy, x, w, true, InputGrad::Compute);
      const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
      best_ms = std::min(best_ms, dt.count());
    }
    const double gflop = 6.0 * double(s.n * s.in * s.out) * 1e-9;
    std::printf("linear %lldx%lldx%lld fwd+bwd: best %.3f ms (%.1f GFLOP/s)\n", (long long)s.n,
                (long long)s.in, (long long)s.out, best_ms, gflop / (best_ms * 1e-3));
    EXPECT_LT(best_ms, 2.0 + gflop * 1e3 / 1.0);  // at least ~1 GFLOP/s plus 2 ms of overhead
  }
  set_num_threads(saved_threads);
}

}  // namespace
}  // namespace hg
