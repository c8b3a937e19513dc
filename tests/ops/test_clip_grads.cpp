// ops::clip_grads_ (global-norm clipping decided on the device, torch.nn.utils.clip_grad_norm_
// semantics) on the CPU backend against a float64 reference written here.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace hg {
namespace {

using test::all_close;
using test::f32_tensor;
using test::random_values;
using test::round_f32;
using test::to_doubles;

// One element, under one float4, odd, across the reduction's blocks.
const int64_t kSizes[] = {1, 3, 1001, 200003};

// The float64 reference: norm = ||g||_2, coef = max_norm / (norm + 1e-6), g * coef if coef < 1.
struct RefClip {
  double norm;
  std::vector<double> grads;
};
RefClip ref_clip(const std::vector<double>& g, double max_norm) {
  double sq = 0;
  for (double v : g) sq += v * v;
  RefClip r{std::sqrt(sq), g};
  const double coef = max_norm / (r.norm + 1e-6);
  if (std::isfinite(r.norm) && coef < 1.0)
    for (double& v : r.grads) v *= coef;
  return r;
}

// The kernel sees the squared norm rounded to f32 once (sum_squares) and its square root rounded
// to f32 (the returned norm): two roundings. Each gradient is one f32 multiply by the
// coefficient rounded to f32, the coefficient carrying the squared norm's rounding (halved by
// the square root): about four roundings in all.
test::Tolerance tol() { return test::tolerance_for(DType::F32, 4); }

TEST(ClipGrads, MatchesReference) {
  for (int64_t n : kSizes) {
    const auto g = round_f32(random_values(n, 1));
    const double norm = ref_clip(g, 1.0).norm;
    // Well below the norm, just below, just above (no clipping) and far above.
    for (double max_norm : {0.01 * norm, 0.999 * norm, 1.001 * norm + 1e-5, 100 * norm}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " max_norm=" << max_norm);
      const RefClip r = ref_clip(g, max_norm);
      Tensor grads = f32_tensor(g, {n});
      const Tensor got_norm = ops::clip_grads_(grads, ops::sum_squares(grads), max_norm);
      EXPECT_EQ(got_norm.dtype(), DType::F32);
      EXPECT_EQ(got_norm.numel(), 1);
      EXPECT_TRUE(all_close(got_norm, {r.norm}, tol()));
      EXPECT_TRUE(all_close(grads, r.grads, tol()));
      if (max_norm > norm) EXPECT_EQ(to_doubles(grads), g) << "no clipping: untouched";
    }
  }
}

TEST(ClipGrads, ClipsToMaxNorm) {
  // [3, 4]: norm 5; max_norm 1 scales by 1 / (5 + 1e-6).
  Tensor grads = f32_tensor({3, 4}, {2});
  const Tensor norm = ops::clip_grads_(grads, ops::sum_squares(grads), 1.0);
  EXPECT_EQ(norm.item(), 5.0);
  const float coef = float(1.0 / (5.0 + 1e-6));
  EXPECT_EQ(grads.to_vector<float>(), (std::vector<float>{3.0f * coef, 4.0f * coef}));
  // At exactly max_norm the coefficient 5 / (5 + 1e-6) is below 1, so PyTorch scales (barely).
  Tensor again = f32_tensor({3, 4}, {2});
  ops::clip_grads_(again, ops::sum_squares(again), 5.0);
  EXPECT_LT(again.to_vector<float>()[1], 4.0f);
  // Zero gradients: norm 0, coefficient max_norm / 1e-6 >= 1, nothing happens.
  Tensor zero = Tensor::zeros({3});
  EXPECT_EQ(ops::clip_grads_(zero, ops::sum_squares(zero), 1.0).item(), 0.0);
  EXPECT_EQ(to_doubles(zero), std::vector<double>(3, 0.0));
}

TEST(ClipGrads, NonFiniteNormLeavesGradientsUntouched) {
  for (double bad : {double(NAN), double(INFINITY), -double(INFINITY)}) {
    SCOPED_TRACE(testing::Message() << "bad=" << bad);
    Tensor grads = f32_tensor({1.0, bad, 2.0}, {3});
    const Tensor norm = ops::clip_grads_(grads, ops::sum_squares(grads), 0.5);
    EXPECT_FALSE(std::isfinite(norm.item()));
    const auto g = to_doubles(grads);
    EXPECT_EQ(g[0], 1.0);
    EXPECT_EQ(g[2], 2.0);
  }
  // Finite gradients whose squares overflow f32: the sum of squares is inf, so is the norm,
  // and the coefficient (0) must not be applied.
  Tensor big = f32_tensor({1e30, 1e30}, {2});
  const Tensor norm = ops::clip_grads_(big, ops::sum_squares(big), 1.0);
  EXPECT_TRUE(std::isinf(norm.item()));
  EXPECT_EQ(to_doubles(big), (std::vector<double>{double(1e30f), double(1e30f)}));
}

TEST(ClipGrads, DecidesFromTheGivenSumOfSquares) {
  // The decision reads the sum_squares operand, not the gradients: a view of a state tensor.
  Tensor grads = f32_tensor({1.0, 1.0}, {2});
  Tensor state = Tensor::from_vector<float>({7.0f, 400.0f}, {2});  // norm 20
  const Tensor norm = ops::clip_grads_(grads, state.narrow(0, 1, 1), 2.0);
  EXPECT_EQ(norm.item(), 20.0);
  const float coef = float(2.0 / (20.0 + 1e-6));
  EXPECT_EQ(grads.to_vector<float>(), (std::vector<float>{coef, coef}));
}

TEST(ClipGrads, ValidatesOperands) {
  Tensor grads = Tensor::zeros({4});
  const Tensor ss = Tensor::zeros({1});
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)})
    test::expect_invalid([&] { ops::clip_grads_(grads, ss, bad); }, {"clip_grads_", "max_norm"});
  test::expect_invalid([&] { ops::clip_grads_(grads, Tensor::zeros({2}), 1.0); },
                       {"clip_grads_", "sum_squares", "[2]"});
  test::expect_invalid([&] { ops::clip_grads_(grads, Tensor(), 1.0); },
                       {"clip_grads_", "sum_squares", "undefined"});
  test::expect_invalid([&] { ops::clip_grads_(grads, Tensor::zeros({1}, DType::F64), 1.0); },
                       {"clip_grads_", "sum_squares", "f32"});
  Tensor g64 = Tensor::zeros({4}, DType::F64);
  test::expect_invalid([&] { ops::clip_grads_(g64, ss, 1.0); }, {"clip_grads_", "gradients"});
  Tensor strided = Tensor::zeros({4, 2}).narrow(1, 0, 1);
  test::expect_invalid([&] { ops::clip_grads_(strided, ss, 1.0); }, {"clip_grads_", "contiguous"});
}

}  // namespace
}  // namespace hg
