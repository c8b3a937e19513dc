// Batch normalisation through hg::ops on the CPU backend, against the float64 reference; the
// reference's backward against finite differences; running statistics, eval mode, argument
// errors and determinism.
#include <gtest/gtest.h>

#include <cstring>

#include "hourglass/base/parallel.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/reference_conv_pool.h"

namespace hg {
namespace {

using test::ref::Values;

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

struct BnCase {
  const char* name;
  Shape shape;  // [N,H,W,C] or [N,C]
};
void PrintTo(const BnCase& c, std::ostream* os) { *os << c.name; }

// Odd sizes, batch 1, 7x7 maps, channel counts off multiples of 8 and 16, the [N,C] form.
std::vector<BnCase> bn_cases() {
  return {
      {"odd", {4, 5, 6, 7}},
      {"batch1_7x7", {1, 7, 7, 10}},
      {"two_dim", {16, 3}},
      {"two_dim_wide", {5, 37}},
      {"c64", {8, 4, 4, 64}},
      {"c130", {2, 3, 3, 130}},
      {"single_channel", {3, 4, 4, 1}},
  };
}

// x is off-centre and not unit-scale so that the normalisation does something; weight and
// bias are random; all rounded to f32.
struct BnData {
  int64_t c = 0;
  Values x, weight, bias, running_mean, running_var, dy;
  Tensor xt, wt, bt, dyt;
};

BnData make_data(const Shape& shape, uint64_t seed) {
  BnData d;
  d.c = shape.back();
  const int64_t n = shape_numel(shape);
  d.x = test::ref::random_f32(n, seed, -1.5, 2.5);
  d.weight = test::ref::random_f32(d.c, seed + 1, 0.5, 1.5);
  d.bias = test::ref::random_f32(d.c, seed + 2, -0.5, 0.5);
  d.running_mean = test::ref::random_f32(d.c, seed + 3, -0.2, 0.2);
  d.running_var = test::ref::random_f32(d.c, seed + 4, 0.5, 2.0);
  d.dy = test::ref::random_f32(n, seed + 5);
  d.xt = test::f32_tensor(d.x, shape);
  d.wt = test::f32_tensor(d.weight, {d.c});
  d.bt = test::f32_tensor(d.bias, {d.c});
  d.dyt = test::f32_tensor(d.dy, shape);
  return d;
}

class BatchNormCase : public ::testing::TestWithParam<BnCase> {};

TEST_P(BatchNormCase, TrainMatchesReferenceAndUpdatesRunningStats) {
  const Shape& shape = GetParam().shape;
  const BnData d = make_data(shape, 3);
  Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const ops::BatchNormForward out =
      ops::batch_norm_train(d.xt, d.wt, d.bt, rm, rv, kMomentum, kEps);
  const test::ref::BatchNormTrain ref =
      test::ref::batch_norm_train(d.x, d.c, d.weight, d.bias, kEps);
  ASSERT_EQ(out.y.shape(), shape);
  ASSERT_EQ(out.mean.shape(), (Shape{d.c}));
  ASSERT_EQ(out.invstd.shape(), (Shape{d.c}));
  // Mean and variance are sums over the M = N*H*W values of a channel; every output depends
  // on them.
  const int64_t m = shape_numel(shape) / d.c;
  EXPECT_TRUE(test::all_close(out.y, ref.y, test::ref::f32_tolerance(m, ref.y))) << "y";
  EXPECT_TRUE(test::all_close(out.mean, ref.mean, test::ref::f32_tolerance(m, ref.mean))) << "mean";
  EXPECT_TRUE(test::all_close(out.invstd, ref.invstd, test::ref::f32_tolerance(m, ref.invstd)))
      << "invstd";

  // PyTorch's update: running = (1 - momentum) * running + momentum * batch, with the
  // unbiased variance M / (M - 1) * var for running_var.
  Values want_mean, want_var;
  for (int64_t j = 0; j < d.c; ++j) {
    want_mean.push_back((1 - kMomentum) * d.running_mean[j] + kMomentum * ref.mean[j]);
    want_var.push_back((1 - kMomentum) * d.running_var[j] + kMomentum * ref.var_unbiased[j]);
  }
  EXPECT_TRUE(test::all_close(rm, want_mean, test::ref::f32_tolerance(m, want_mean)))
      << "running_mean";
  EXPECT_TRUE(test::all_close(rv, want_var, test::ref::f32_tolerance(m, want_var)))
      << "running_var";
}

TEST_P(BatchNormCase, EvalUsesRunningStats) {
  const Shape& shape = GetParam().shape;
  const BnData d = make_data(shape, 5);
  const Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  const Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const Tensor y = ops::batch_norm_eval(d.xt, d.wt, d.bt, rm, rv, kEps);
  const Values ref =
      test::ref::batch_norm_eval(d.x, d.c, d.weight, d.bias, d.running_mean, d.running_var, kEps);
  // No reduction: each output is a handful of rounded operations (scale, subtract, multiply,
  // add); a length of 4 allows for them.
  EXPECT_TRUE(test::all_close(y, ref, test::ref::f32_tolerance(4, ref)));
}

TEST_P(BatchNormCase, BackwardMatchesReference) {
  const Shape& shape = GetParam().shape;
  const BnData d = make_data(shape, 7);
  Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const ops::BatchNormForward fwd =
      ops::batch_norm_train(d.xt, d.wt, d.bt, rm, rv, kMomentum, kEps);
  const ops::BatchNormGrads g = ops::batch_norm_backward(d.dyt, d.xt, d.wt, fwd.mean, fwd.invstd);
  const test::ref::BatchNormGrads ref =
      test::ref::batch_norm_backward(d.dy, d.x, d.c, d.weight, kEps);
  ASSERT_EQ(g.dx.shape(), shape);
  // dweight and dbias sum over the M values of a channel, and dx depends on both.
  const int64_t m = shape_numel(shape) / d.c;
  EXPECT_TRUE(test::all_close(g.dx, ref.dx, test::ref::f32_tolerance(m, ref.dx))) << "dx";
  EXPECT_TRUE(test::all_close(g.dweight, ref.dweight, test::ref::f32_tolerance(m, ref.dweight)))
      << "dweight";
  EXPECT_TRUE(test::all_close(g.dbias, ref.dbias, test::ref::f32_tolerance(m, ref.dbias)))
      << "dbias";
}

// loss = sum(y * r) with y from the training-mode reference (batch statistics depend on x).
// The loss is smooth, so central differences with step 1e-5 are accurate to about
// step^2 (truncation) + 1e-16 |loss| / step (rounding), far below the tolerance.
TEST_P(BatchNormCase, ReferenceBackwardMatchesFiniteDifferences) {
  const Shape& shape = GetParam().shape;
  const BnData d = make_data(shape, 9);
  const Values& r = d.dy;
  const test::ref::BatchNormGrads g = test::ref::batch_norm_backward(r, d.x, d.c, d.weight, kEps);
  const auto loss = [&](const Values& x, const Values& w, const Values& b) {
    return test::ref::dot(test::ref::batch_norm_train(x, d.c, w, b, kEps).y, r);
  };
  const double step = 1e-5;
  Values got, want;
  for (size_t i : test::ref::sample_indices(d.x.size(), 12, 3)) {
    got.push_back(g.dx[i]);
    want.push_back(test::ref::finite_difference(
        [&](const Values& x) { return loss(x, d.weight, d.bias); }, d.x, i, step));
  }
  for (size_t j = 0; j < size_t(d.c); ++j) {
    got.push_back(g.dweight[j]);
    want.push_back(test::ref::finite_difference(
        [&](const Values& w) { return loss(d.x, w, d.bias); }, d.weight, j, step));
    got.push_back(g.dbias[j]);
    want.push_back(test::ref::finite_difference(
        [&](const Values& b) { return loss(d.x, d.weight, b); }, d.bias, j, step));
  }
  EXPECT_TRUE(test::all_close(got, want, test::Tolerance{1e-6, 1e-6}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormCase, ::testing::ValuesIn(bn_cases()),
                         [](const ::testing::TestParamInfo<BnCase>& info) {
                           return std::string(info.param.name);
                         });

// Everything batch norm returns, as raw floats.
std::vector<std::vector<float>> run_train_and_backward(const BnData& d, const Shape& shape) {
  Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const ops::BatchNormForward f = ops::batch_norm_train(d.xt, d.wt, d.bt, rm, rv, kMomentum, kEps);
  const ops::BatchNormGrads g = ops::batch_norm_backward(d.dyt, d.xt, d.wt, f.mean, f.invstd);
  std::vector<std::vector<float>> out;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&f.y, &f.mean, &f.invstd, &rm, &rv,
                                                              &g.dx, &g.dweight, &g.dbias})
    out.push_back(t->to_vector<float>());
  return out;
}

void expect_bit_identical(const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)))
        << "output " << i;
  }
}

TEST(BatchNorm, RepeatedRunsAreBitIdentical) {
  // Large enough for many reduction blocks and several threads.
  const Shape shape{8, 16, 16, 40};
  const BnData d = make_data(shape, 13);
  expect_bit_identical(run_train_and_backward(d, shape), run_train_and_backward(d, shape));
}

TEST(BatchNorm, ResultsDoNotDependOnThreadCount) {
  // The reduction blocks depend only on the shape, so one thread gives the same bits.
  const Shape shape{8, 16, 16, 40};
  const BnData d = make_data(shape, 17);
  const auto parallel = run_train_and_backward(d, shape);
  const int threads = num_threads();
  set_num_threads(1);
  const auto serial = run_train_and_backward(d, shape);
  set_num_threads(threads);
  expect_bit_identical(parallel, serial);
}

TEST(BatchNorm, BadArgumentsAreInvalidInput) {
  const Tensor x = Tensor::zeros({2, 3, 3, 4});
  const Tensor w = Tensor::full({4}, 1.0), b = Tensor::zeros({4});
  Tensor rm = Tensor::zeros({4}), rv = Tensor::full({4}, 1.0);
  Tensor rm3 = Tensor::zeros({3});
  // Parameter or statistic of the wrong length.
  EXPECT_INVALID_INPUT(ops::batch_norm_train(x, Tensor::full({3}, 1.0), b, rm, rv, 0.1, 1e-5));
  EXPECT_INVALID_INPUT(ops::batch_norm_train(x, w, b, rm3, rv, 0.1, 1e-5));
  EXPECT_INVALID_INPUT(ops::batch_norm_eval(x, w, b, rm3, rv, 1e-5));
  // Input that is neither [N,H,W,C] nor [N,C].
  EXPECT_INVALID_INPUT(ops::batch_norm_train(Tensor::zeros({2, 3, 4}), w, b, rm, rv, 0.1, 1e-5));
  // One value per channel: no batch statistics.
  EXPECT_INVALID_INPUT(ops::batch_norm_train(Tensor::zeros({1, 4}), w, b, rm, rv, 0.1, 1e-5));
  // f64 input: the CPU backend computes in f32 only.
  EXPECT_INVALID_INPUT(ops::batch_norm_train(x.to(DType::F64), w, b, rm, rv, 0.1, 1e-5));
  // Backward: grad of another shape; saved statistics of the wrong length.
  EXPECT_INVALID_INPUT(ops::batch_norm_backward(Tensor::zeros({2, 3, 3, 5}), x, w, rm, rv));
  EXPECT_INVALID_INPUT(ops::batch_norm_backward(x, x, w, rm3, rv));
}

}  // namespace
}  // namespace hg
