// A pair of batch norms summed, then a ReLU (batch_norm_train / batch_norm_backward with a ReLU
// and a shortcut in their fusion structs) on the CPU backend: against a float64 reference
// (relu(bn(x) + bn(x2)) with both running statistics updated, and batch norm's backward of the
// masked gradient for each input), bit-identity with the ops it composes, and argument errors.
// The reference batch norm's backward is checked against finite differences in
// test_batch_norm.cpp and test_batch_norm_relu.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/reference_conv_pool.h"

namespace hg {
namespace {

using test::ref::Values;

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

struct PairCase {
  const char* name;
  Shape shape;  // [N,H,W,C] or [N,C]
};
void PrintTo(const PairCase& c, std::ostream* os) { *os << c.name; }

std::vector<PairCase> pair_cases() {
  return {{"odd", {4, 5, 6, 7}},
          {"batch1_7x7", {1, 7, 7, 10}},
          {"two_dim", {16, 3}},
          {"c130", {2, 3, 3, 130}},
          {"single_channel", {3, 4, 4, 1}}};
}

// One batch norm's input and parameters.
struct Side {
  Values x, weight, bias, running_mean, running_var;
  Tensor xt, wt, bt;
  Tensor rm() const { return test::f32_tensor(running_mean, {int64_t(running_mean.size())}); }
  Tensor rv() const { return test::f32_tensor(running_var, {int64_t(running_var.size())}); }
};

Side make_side(const Shape& shape, uint64_t seed, double lo, double hi) {
  const int64_t c = shape.back(), n = shape_numel(shape);
  Side s;
  s.x = test::ref::random_f32(n, seed, lo, hi);
  s.weight = test::ref::random_f32(c, seed + 1, 0.5, 1.5);
  s.bias = test::ref::random_f32(c, seed + 2, -0.5, 0.5);
  s.running_mean = test::ref::random_f32(c, seed + 3, -0.2, 0.2);
  s.running_var = test::ref::random_f32(c, seed + 4, 0.5, 2.0);
  s.xt = test::f32_tensor(s.x, shape);
  s.wt = test::f32_tensor(s.weight, {c});
  s.bt = test::f32_tensor(s.bias, {c});
  return s;
}

// Expected running statistics after one training pass.
void expect_running(const Tensor& rm, const Tensor& rv, const Side& s,
                    const test::ref::BatchNormTrain& bn, int64_t m) {
  Values want_mean, want_var;
  for (size_t j = 0; j < s.running_mean.size(); ++j) {
    want_mean.push_back((1 - kMomentum) * s.running_mean[j] + kMomentum * bn.mean[j]);
    want_var.push_back((1 - kMomentum) * s.running_var[j] + kMomentum * bn.var_unbiased[j]);
  }
  EXPECT_TRUE(test::all_close(rm, want_mean, test::ref::f32_tolerance(m, want_mean)));
  EXPECT_TRUE(test::all_close(rv, want_var, test::ref::f32_tolerance(m, want_var)));
}

class BatchNormPairReluCase : public ::testing::TestWithParam<PairCase> {};

TEST_P(BatchNormPairReluCase, MatchesReference) {
  const PairCase& pc = GetParam();
  const int64_t c = pc.shape.back(), m = shape_numel(pc.shape) / c;
  const Side a = make_side(pc.shape, 3, -1.5, 2.5), b = make_side(pc.shape, 10, -2.0, 1.0);
  Tensor rm = a.rm(), rv = a.rv(), rm2 = b.rm(), rv2 = b.rv();
  const ops::BatchNormForward f =
      ops::batch_norm_train(a.xt, a.wt, a.bt, rm, rv, kMomentum, kEps,
                            {.relu = true, .shortcut = {b.xt, b.wt, b.bt, rm2, rv2}});
  const test::ref::BatchNormTrain ra = test::ref::batch_norm_train(a.x, c, a.weight, a.bias, kEps);
  const test::ref::BatchNormTrain rb = test::ref::batch_norm_train(b.x, c, b.weight, b.bias, kEps);
  Values want(ra.y.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, ra.y[i] + rb.y[i]);
  ASSERT_EQ(f.y.shape(), pc.shape);
  EXPECT_TRUE(test::all_close(f.y, want, test::ref::f32_tolerance(m, want))) << "y";
  EXPECT_TRUE(test::all_close(f.mean, ra.mean, test::ref::f32_tolerance(m, ra.mean)));
  EXPECT_TRUE(test::all_close(f.invstd, ra.invstd, test::ref::f32_tolerance(m, ra.invstd)));
  EXPECT_TRUE(test::all_close(f.mean2, rb.mean, test::ref::f32_tolerance(m, rb.mean)));
  EXPECT_TRUE(test::all_close(f.invstd2, rb.invstd, test::ref::f32_tolerance(m, rb.invstd)));
  expect_running(rm, rv, a, ra, m);
  expect_running(rm2, rv2, b, rb, m);
  const std::vector<float> y = f.y.to_vector<float>();
  EXPECT_GT(std::count(y.begin(), y.end(), 0.0f), 0) << "the ReLU clipped nothing";
  EXPECT_GT(std::count_if(y.begin(), y.end(), [](float v) { return v > 0; }), 0);

  // Backward, the gradient in one part and in two, from the op's own mask.
  const Values dy = test::ref::random_f32(a.x.size(), 20),
               dy2 = test::ref::random_f32(a.x.size(), 21);
  const Values y_got = test::to_doubles(f.y);
  for (const bool two_parts : {false, true}) {
    const ops::BatchNormGrads g =
        ops::batch_norm_backward(test::f32_tensor(dy, pc.shape), a.xt, a.wt, f.mean, f.invstd,
                                 {.relu_output = f.mask,
                                  .dy2 = two_parts ? test::f32_tensor(dy2, pc.shape) : Tensor(),
                                  .shortcut = {b.xt, b.wt, f.mean2, f.invstd2}});
    Values dz(dy.size());
    for (size_t i = 0; i < dz.size(); ++i)
      dz[i] = y_got[i] > 0 ? dy[i] + (two_parts ? dy2[i] : 0.0) : 0.0;
    const test::ref::BatchNormGrads ga = test::ref::batch_norm_backward(dz, a.x, c, a.weight, kEps);
    const test::ref::BatchNormGrads gb = test::ref::batch_norm_backward(dz, b.x, c, b.weight, kEps);
    EXPECT_TRUE(test::all_close(g.dx, ga.dx, test::ref::f32_tolerance(m, ga.dx))) << "dx";
    EXPECT_TRUE(test::all_close(g.dweight, ga.dweight, test::ref::f32_tolerance(m, ga.dweight)));
    EXPECT_TRUE(test::all_close(g.dbias, ga.dbias, test::ref::f32_tolerance(m, ga.dbias)));
    EXPECT_TRUE(test::all_close(g.dx2, gb.dx, test::ref::f32_tolerance(m, gb.dx))) << "dx2";
    EXPECT_TRUE(test::all_close(g.dweight2, gb.dweight, test::ref::f32_tolerance(m, gb.dweight)));
    EXPECT_TRUE(test::all_close(g.dbias2, gb.dbias, test::ref::f32_tolerance(m, gb.dbias)));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormPairReluCase, ::testing::ValuesIn(pair_cases()),
                         [](const ::testing::TestParamInfo<PairCase>& info) {
                           return std::string(info.param.name);
                         });

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The CPU composes the ops a downsampling block runs when the pair is not fused: the second
// batch norm, then the fused batch norm + residual + ReLU with its output as the residual, and
// their backwards. Same bits, so a ResNet trains identically either way on the CPU.
TEST(BatchNormPairRelu, CpuIsBitIdenticalToTheOpsItReplaces) {
  const Shape shape{8, 6, 6, 24};
  const Side a = make_side(shape, 31, -1.5, 2.5), b = make_side(shape, 40, -2.0, 1.0);
  Tensor rm = a.rm(), rv = a.rv(), rm2 = b.rm(), rv2 = b.rv();
  const ops::BatchNormForward f =
      ops::batch_norm_train(a.xt, a.wt, a.bt, rm, rv, kMomentum, kEps,
                            {.relu = true, .shortcut = {b.xt, b.wt, b.bt, rm2, rv2}});
  Tensor urm = a.rm(), urv = a.rv(), urm2 = b.rm(), urv2 = b.rv();
  const ops::BatchNormForward shortcut =
      ops::batch_norm_train(b.xt, b.wt, b.bt, urm2, urv2, kMomentum, kEps);
  const ops::BatchNormForward main = ops::batch_norm_train(
      a.xt, a.wt, a.bt, urm, urv, kMomentum, kEps, {.relu = true, .residual = shortcut.y});
  EXPECT_TRUE(same_bits(f.y, main.y));
  ASSERT_EQ(f.mask.nbytes(), main.mask.nbytes());
  EXPECT_EQ(std::memcmp(f.mask.data_ptr(), main.mask.data_ptr(), f.mask.nbytes()), 0) << "mask";
  using Pair = std::pair<const Tensor*, const Tensor*>;
  for (const Pair& p : std::initializer_list<Pair>{{&rm, &urm},
                                                   {&rv, &urv},
                                                   {&rm2, &urm2},
                                                   {&rv2, &urv2},
                                                   {&f.mean, &main.mean},
                                                   {&f.invstd, &main.invstd},
                                                   {&f.mean2, &shortcut.mean},
                                                   {&f.invstd2, &shortcut.invstd}})
    EXPECT_TRUE(same_bits(*p.first, *p.second));
  const Tensor dy = test::f32_tensor(test::ref::random_f32(shape_numel(shape), 50), shape);
  const Tensor dy2 = test::f32_tensor(test::ref::random_f32(shape_numel(shape), 51), shape);
  const ops::BatchNormGrads g = ops::batch_norm_backward(
      dy, a.xt, a.wt, f.mean, f.invstd,
      {.relu_output = f.mask, .dy2 = dy2, .shortcut = {b.xt, b.wt, f.mean2, f.invstd2}});
  const ops::BatchNormGrads gm = ops::batch_norm_backward(
      dy, a.xt, a.wt, main.mean, main.invstd,
      {.relu_output = main.mask, .dy2 = dy2, .residual_grad = ResidualGrad::Compute});
  const ops::BatchNormGrads gs =
      ops::batch_norm_backward(gm.dresidual, b.xt, b.wt, shortcut.mean, shortcut.invstd);
  EXPECT_TRUE(same_bits(g.dx, gm.dx) && same_bits(g.dweight, gm.dweight) &&
              same_bits(g.dbias, gm.dbias));
  EXPECT_TRUE(same_bits(g.dx2, gs.dx) && same_bits(g.dweight2, gs.dweight) &&
              same_bits(g.dbias2, gs.dbias));
}

TEST(BatchNormPairRelu, BadArgumentsAreInvalidInput) {
  const Tensor x = Tensor::zeros({2, 3, 3, 4});
  const Tensor w = Tensor::full({4}, 1.0), b = Tensor::zeros({4});
  Tensor rm = Tensor::zeros({4}), rv = Tensor::full({4}, 1.0);
  Tensor rm2 = Tensor::zeros({4}), rv2 = Tensor::full({4}, 1.0);
  // Second input of another shape or dtype; a second parameter of the wrong length.
  EXPECT_INVALID_INPUT(ops::batch_norm_train(
      x, w, b, rm, rv, 0.1, 1e-5,
      {.relu = true, .shortcut = {Tensor::zeros({2, 3, 3, 5}), w, b, rm2, rv2}}));
  EXPECT_INVALID_INPUT(ops::batch_norm_train(
      x, w, b, rm, rv, 0.1, 1e-5, {.relu = true, .shortcut = {x.to(DType::F64), w, b, rm2, rv2}}));
  EXPECT_INVALID_INPUT(
      ops::batch_norm_train(x, w, b, rm, rv, 0.1, 1e-5,
                            {.relu = true, .shortcut = {x, Tensor::full({3}, 1.0), b, rm2, rv2}}));
  Tensor rv_f64 = Tensor::zeros({4}, DType::F64);
  EXPECT_INVALID_INPUT(ops::batch_norm_train(x, w, b, rm, rv, 0.1, 1e-5,
                                             {.relu = true, .shortcut = {x, w, b, rm2, rv_f64}}));
  // Backward: y given in place of the mask; a mask of another shape; a second input of
  // another shape.
  const Tensor mask = Tensor::zeros({18, 1}, DType::U8);
  EXPECT_INVALID_INPUT(
      ops::batch_norm_backward(x, x, w, rm, rv, {.relu_output = x, .shortcut = {x, w, rm, rv}}));
  EXPECT_INVALID_INPUT(ops::batch_norm_backward(
      x, x, w, rm, rv,
      {.relu_output = Tensor::zeros({18, 2}, DType::U8), .shortcut = {x, w, rm, rv}}));
  EXPECT_INVALID_INPUT(ops::batch_norm_backward(
      x, x, w, rm, rv,
      {.relu_output = mask, .shortcut = {Tensor::zeros({2, 3, 3, 5}), w, rm, rv}}));
}

}  // namespace
}  // namespace hg
