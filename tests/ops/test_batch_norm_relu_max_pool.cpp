// Batch norm + ReLU + max pooling in training (batch_norm_relu_max_pool_train, an image
// network's stem) on the CPU backend: against a float64 reference (the pooled
// relu(bn(x)), the running statistics, the ReLU mask, and the backward through the pooling and
// the batch norm), bit-identity with the ops it composes through autograd, and argument
// errors. The reference ops are checked against finite differences in their own tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "hourglass/autograd/functions.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/reference_conv_pool.h"

namespace hg {
namespace {

using test::ref::Values;

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

struct PoolCase {
  const char* name;
  Shape shape;  // [N,H,W,C]
  Pool2dParams pool;
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

std::vector<PoolCase> pool_cases() {
  const Pool2dParams stem{3, 3, 2, 2, 1, 1};
  return {{"stem_even", {2, 8, 6, 16}, stem},
          {"stem_odd", {3, 7, 5, 3}, stem},
          {"window2_stride1", {2, 5, 5, 4}, Pool2dParams{2, 2, 1, 1, 0, 0}}};
}

struct Inputs {
  Values x, weight, bias, running_mean, running_var;
  Tensor xt, wt, bt;
};

Inputs make_inputs(const Shape& shape, uint64_t seed) {
  const int64_t c = shape.back();
  Inputs in;
  in.x = test::ref::random_f32(shape_numel(shape), seed, -1.5, 2.5);
  in.weight = test::ref::random_f32(c, seed + 1, -1.5, 1.5);  // negative scales too
  in.bias = test::ref::random_f32(c, seed + 2, -0.5, 0.5);
  in.running_mean = test::ref::random_f32(c, seed + 3, -0.2, 0.2);
  in.running_var = test::ref::random_f32(c, seed + 4, 0.5, 2.0);
  in.xt = test::f32_tensor(in.x, shape);
  in.wt = test::f32_tensor(in.weight, {c});
  in.bt = test::f32_tensor(in.bias, {c});
  return in;
}

Tensor vec(const Values& v) { return test::f32_tensor(v, {int64_t(v.size())}); }

class BatchNormReluMaxPoolCase : public ::testing::TestWithParam<PoolCase> {};

TEST_P(BatchNormReluMaxPoolCase, MatchesReference) {
  const PoolCase& pc = GetParam();
  const int64_t c = pc.shape.back(), m = shape_numel(pc.shape) / c;
  const Inputs in = make_inputs(pc.shape, 7);
  Tensor rm = vec(in.running_mean), rv = vec(in.running_var);
  const ops::BatchNormReluPoolForward f =
      ops::batch_norm_relu_max_pool_train(in.xt, in.wt, in.bt, rm, rv, kMomentum, kEps, pc.pool);

  const test::ref::BatchNormTrain bn =
      test::ref::batch_norm_train(in.x, c, in.weight, in.bias, kEps);
  Values z(bn.y.size());
  for (size_t i = 0; i < z.size(); ++i) z[i] = std::max(0.0, bn.y[i]);
  const test::ref::PoolShape ps{pc.shape[0], pc.shape[1], pc.shape[2], c, pc.pool};
  const Values want = test::ref::max_pool2d(z, ps);
  ASSERT_EQ(f.y.shape(), ps.y_shape());
  EXPECT_TRUE(test::all_close(f.y, want, test::ref::f32_tolerance(m, want))) << "y";
  EXPECT_TRUE(test::all_close(f.mean, bn.mean, test::ref::f32_tolerance(m, bn.mean)));
  EXPECT_TRUE(test::all_close(f.invstd, bn.invstd, test::ref::f32_tolerance(m, bn.invstd)));
  Values want_mean, want_var;
  for (int64_t j = 0; j < c; ++j) {
    want_mean.push_back((1 - kMomentum) * in.running_mean[j] + kMomentum * bn.mean[j]);
    want_var.push_back((1 - kMomentum) * in.running_var[j] + kMomentum * bn.var_unbiased[j]);
  }
  EXPECT_TRUE(test::all_close(rm, want_mean, test::ref::f32_tolerance(m, want_mean)));
  EXPECT_TRUE(test::all_close(rv, want_var, test::ref::f32_tolerance(m, want_var)));

  // The mask: bit c % 8 of byte c / 8 of each row, set where relu(bn(x)) > 0. Elements within
  // the tolerance of 0 may go either way.
  const std::vector<uint8_t> mask = f.mask.to_vector<uint8_t>();
  const int64_t stride = ops::relu_mask_bytes(c);
  ASSERT_EQ(int64_t(mask.size()), m * stride);
  int64_t set = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const double v = bn.y[size_t(r * c + j)];
      const bool bit = (mask[size_t(r * stride + j / 8)] >> (j % 8)) & 1;
      set += bit;
      if (std::abs(v) > 1e-5) EXPECT_EQ(bit, v > 0) << "row " << r << " channel " << j;
    }
  EXPECT_GT(set, 0);
  EXPECT_LT(set, m * c) << "the ReLU clipped nothing";

  // Backward through the recorded node: the pooling's gradient to the first maximum of each
  // window, masked, then batch norm's backward.
  Tensor x = in.xt.clone(), w = in.wt.clone(), b = in.bt.clone();
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
  Tensor rm2 = vec(in.running_mean), rv2 = vec(in.running_var);
  const Tensor y = fn::batch_norm_relu_max_pool(x, w, b, rm2, rv2, kMomentum, kEps, pc.pool);
  const Values dy = test::ref::random_f32(shape_numel(ps.y_shape()), 20);
  autograd::backward(fn::sum(fn::mul(y, test::f32_tensor(dy, ps.y_shape()))));
  const Values dz_pool = test::ref::max_pool2d_backward(dy, z, ps);
  Values dz(dz_pool.size());
  for (size_t i = 0; i < dz.size(); ++i) dz[i] = z[i] > 0 ? dz_pool[i] : 0.0;
  const test::ref::BatchNormGrads g = test::ref::batch_norm_backward(dz, in.x, c, in.weight, kEps);
  EXPECT_TRUE(test::all_close(x.grad(), g.dx, test::ref::f32_tolerance(m, g.dx))) << "dx";
  EXPECT_TRUE(test::all_close(w.grad(), g.dweight, test::ref::f32_tolerance(m, g.dweight)));
  EXPECT_TRUE(test::all_close(b.grad(), g.dbias, test::ref::f32_tolerance(m, g.dbias)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormReluMaxPoolCase, ::testing::ValuesIn(pool_cases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return std::string(info.param.name);
                         });

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Through autograd, the fused op gives the bits of the ops it replaces (batch_norm_relu, then
// max_pool2d): outputs, running statistics and every gradient, with the output used twice (as a
// stem's feeds a block and its shortcut), so that its gradient arrives in two parts.
TEST(BatchNormReluMaxPool, CpuIsBitIdenticalToTheOpsItReplaces) {
  const Shape shape{4, 10, 12, 8};
  const Pool2dParams pool{3, 3, 2, 2, 1, 1};
  const Inputs in = make_inputs(shape, 31);
  const Values dy = test::ref::random_f32(4 * 5 * 6 * 8, 40),
               dy2 = test::ref::random_f32(4 * 5 * 6 * 8, 41);
  struct Run {
    Tensor y, rm, rv, dx, dw, db;
  };
  auto run = [&](bool fused) {
    Run r;
    Tensor x = in.xt.clone(), w = in.wt.clone(), b = in.bt.clone();
    for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
    r.rm = vec(in.running_mean), r.rv = vec(in.running_var);
    r.y = fused ? fn::batch_norm_relu_max_pool(x, w, b, r.rm, r.rv, kMomentum, kEps, pool)
                : fn::max_pool2d(fn::batch_norm_relu(x, Tensor(), w, b, r.rm, r.rv,
                                                     fn::BatchNormMode::Train, kMomentum, kEps),
                                 pool);
    autograd::backward(fn::add(fn::sum(fn::mul(r.y, test::f32_tensor(dy, r.y.shape()))),
                               fn::sum(fn::mul(r.y, test::f32_tensor(dy2, r.y.shape())))));
    r.dx = x.grad(), r.dw = w.grad(), r.db = b.grad();
    return r;
  };
  const Run fused = run(true), plain = run(false);
  EXPECT_TRUE(same_bits(fused.y, plain.y));
  EXPECT_TRUE(same_bits(fused.rm, plain.rm));
  EXPECT_TRUE(same_bits(fused.rv, plain.rv));
  EXPECT_TRUE(same_bits(fused.dx, plain.dx));
  EXPECT_TRUE(same_bits(fused.dw, plain.dw));
  EXPECT_TRUE(same_bits(fused.db, plain.db));
}

TEST(BatchNormReluMaxPool, BadArgumentsAreRefusedNamingThem) {
  const Inputs in = make_inputs({2, 4, 4, 3}, 50);
  Tensor rm = vec(in.running_mean), rv = vec(in.running_var);
  const char* op = "batch_norm_relu_max_pool_train";
  test::expect_invalid(
      [&] {
        ops::batch_norm_relu_max_pool_train(in.xt, in.wt, in.bt, rm, rv, kMomentum, kEps,
                                            Pool2dParams{0, 0, 1, 1, 0, 0});
      },
      {op, "kernel"});
  test::expect_invalid(
      [&] {
        ops::batch_norm_relu_max_pool_train(in.xt.view({32, 3}), in.wt, in.bt, rm, rv, kMomentum,
                                            kEps, Pool2dParams{3, 3, 2, 2, 1, 1});
      },
      {op, "input"});
  test::expect_invalid(
      [&] {
        ops::batch_norm_relu_max_pool_train(in.xt, vec({1.0, 2.0}), in.bt, rm, rv, kMomentum, kEps,
                                            Pool2dParams{3, 3, 2, 2, 1, 1});
      },
      {op, "weight"});
}

}  // namespace
}  // namespace hg
