// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_ semantics) over the flat arena.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hourglass/optim/clip.h"
#include "support/compare.h"

namespace hg {
namespace {

FlatParameters arena_with_grads(const std::vector<float>& grads) {
  const int64_t n = int64_t(grads.size());
  return {Tensor::zeros({n}), Tensor::from_vector(grads, {n}), n};
}

TEST(Clip, ScalesWhenAboveMaxNorm) {
  FlatParameters flat = arena_with_grads({3, 4});  // norm 5
  EXPECT_DOUBLE_EQ(optim::grad_norm(flat), 5.0);
  const double norm = optim::clip_grad_norm(flat, 1.0);
  EXPECT_DOUBLE_EQ(norm, 5.0);  // the norm before clipping
  const double coef = 1.0 / (5.0 + 1e-6);
  const auto g = flat.grads.to_vector<float>();
  EXPECT_FLOAT_EQ(g[0], float(3 * coef));
  EXPECT_FLOAT_EQ(g[1], float(4 * coef));
  EXPECT_NEAR(optim::grad_norm(flat), 1.0, 1e-6);
}

TEST(Clip, LeavesSmallGradientsAlone) {
  FlatParameters flat = arena_with_grads({3, 4});
  EXPECT_DOUBLE_EQ(optim::clip_grad_norm(flat, 10.0), 5.0);
  EXPECT_EQ(flat.grads.to_vector<float>(), (std::vector<float>{3, 4}));
  // At exactly max_norm the coefficient 5 / (5 + 1e-6) is below 1, so PyTorch scales (barely).
  optim::clip_grad_norm(flat, 5.0);
  EXPECT_LT(flat.grads.to_vector<float>()[1], 4.0f);
  FlatParameters zero = arena_with_grads({0, 0, 0});
  EXPECT_EQ(optim::clip_grad_norm(zero, 1.0), 0.0);
  EXPECT_EQ(zero.grads.to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

TEST(Clip, LargeArenaMatchesFloat64Norm) {
  const int64_t n = 300007;
  const auto g = test::round_f32(test::random_values(n, 3));
  double sq = 0;
  for (double v : g) sq += v * v;
  FlatParameters flat{Tensor::zeros({n}), test::f32_tensor(g, {n}), 0};
  const double norm = optim::clip_grad_norm(flat, 2.0);
  // The squared norm is accumulated in double and returned as f32: one rounding.
  EXPECT_NEAR(norm, std::sqrt(sq), std::sqrt(sq) * 1e-7);
  EXPECT_NEAR(optim::grad_norm(flat), 2.0, 2.0 * 1e-6);
}

TEST(Clip, NonFiniteNormLeavesGradientsUntouched) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  FlatParameters flat = arena_with_grads({1, nan, 2});
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm(flat, 1.0)));
  const auto g = flat.grads.to_vector<float>();
  EXPECT_EQ(g[0], 1.0f);
  EXPECT_EQ(g[2], 2.0f);
  FlatParameters inf = arena_with_grads({1, std::numeric_limits<float>::infinity()});
  EXPECT_TRUE(std::isinf(optim::clip_grad_norm(inf, 1.0)));
  EXPECT_EQ(inf.grads.to_vector<float>()[0], 1.0f);
}

TEST(Clip, TensorVariantKeepsNormOnDevice) {
  FlatParameters flat = arena_with_grads({6, 8});  // norm 10
  const Tensor norm = optim::clip_grad_norm_tensor(flat, 5.0);
  EXPECT_EQ(norm.dtype(), DType::F32);
  EXPECT_EQ(norm.numel(), 1);
  EXPECT_EQ(norm.device(), flat.grads.device());
  EXPECT_DOUBLE_EQ(norm.item(), 10.0);
  EXPECT_NEAR(optim::grad_norm(flat), 5.0, 1e-5);
}

TEST(Clip, TensorVariantEqualsHostVersionBitForBit) {
  // The device decision (ops::clip_grads_) against the host one (clip_grad_norm reads the norm
  // back and calls mul_scalar_): same gradients and norm, to the bit, clipped or not.
  for (int64_t n : {int64_t(1), int64_t(1001), int64_t(300007)}) {
    const auto g = test::round_f32(test::random_values(n, 4));
    double sq = 0;
    for (double v : g) sq += v * v;
    const double norm = std::sqrt(sq);
    for (double max_norm : {0.1 * norm, 0.9999 * norm, 1.5 * norm}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " max_norm=" << max_norm);
      FlatParameters host{Tensor::zeros({n}), test::f32_tensor(g, {n}), 0};
      FlatParameters device{Tensor::zeros({n}), test::f32_tensor(g, {n}), 0};
      const double host_norm = optim::clip_grad_norm(host, max_norm);
      const Tensor device_norm = optim::clip_grad_norm_tensor(device, max_norm);
      EXPECT_EQ(device_norm.item(), double(float(host_norm)));
      EXPECT_EQ(device.grads.to_vector<float>(), host.grads.to_vector<float>());
      if (max_norm > norm)
        EXPECT_EQ(test::to_doubles(device.grads), g) << "untouched";
      else
        EXPECT_NE(test::to_doubles(device.grads), g) << "clipped";
    }
  }
}

TEST(Clip, TensorVariantLeavesNonFiniteGradientsAlone) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, inf}) {
    FlatParameters flat = arena_with_grads({1, bad, 2});
    EXPECT_FALSE(std::isfinite(optim::clip_grad_norm_tensor(flat, 1.0).item()));
    const auto g = flat.grads.to_vector<float>();
    EXPECT_EQ(g[0], 1.0f);
    EXPECT_EQ(g[2], 2.0f);
  }
}

TEST(Clip, BadMaxNormIsAnError) {
  FlatParameters flat = arena_with_grads({1});
  EXPECT_THROW(optim::clip_grad_norm(flat, 0.0), Error);
  EXPECT_THROW(optim::clip_grad_norm(flat, -1.0), Error);
  EXPECT_THROW(optim::clip_grad_norm_tensor(flat, std::nan("")), Error);
  EXPECT_THROW(optim::clip_grad_norm_tensor(flat, 0.0), Error);
}

}  // namespace
}  // namespace hg
