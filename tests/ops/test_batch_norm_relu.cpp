// The fused batch norm + residual add + ReLU (batch_norm_train / batch_norm_backward with a ReLU
// and a residual in their fusion structs) on the CPU backend: against a float64 reference
// (relu(bn(x) + r) and, with the mask y > 0, batch norm's backward of the masked gradient), the
// reference's backward against finite differences, bit-identity with the unfused ops it composes,
// and argument errors.
#include <gtest/gtest.h>

#include <cstring>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/reference_conv_pool.h"

namespace hg {
namespace {

using test::ref::Values;

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

struct FusedCase {
  const char* name;
  Shape shape;  // [N,H,W,C] or [N,C]
  bool residual;
};
void PrintTo(const FusedCase& c, std::ostream* os) { *os << c.name; }

// Odd sizes, batch 1 with 7x7 maps, channel counts off multiples of 8, the [N,C] form, one
// channel; with and without a residual.
std::vector<FusedCase> fused_cases() {
  return {
      {"odd_residual", {4, 5, 6, 7}, true},
      {"odd", {4, 5, 6, 7}, false},
      {"batch1_7x7_residual", {1, 7, 7, 10}, true},
      {"two_dim_residual", {16, 3}, true},
      {"c130", {2, 3, 3, 130}, false},
      {"single_channel_residual", {3, 4, 4, 1}, true},
  };
}

// x off-centre; the residual centred near zero so that about half the outputs are clipped.
struct Data {
  int64_t c = 0;
  Values x, residual, weight, bias, running_mean, running_var, dy;
  Tensor xt, rt, wt, bt, dyt;  // rt undefined without a residual
};

Data make_data(const FusedCase& fc, uint64_t seed) {
  Data d;
  d.c = fc.shape.back();
  const int64_t n = shape_numel(fc.shape);
  d.x = test::ref::random_f32(n, seed, -1.5, 2.5);
  if (fc.residual) d.residual = test::ref::random_f32(n, seed + 6, -1.0, 1.0);
  d.weight = test::ref::random_f32(d.c, seed + 1, 0.5, 1.5);
  d.bias = test::ref::random_f32(d.c, seed + 2, -0.5, 0.5);
  d.running_mean = test::ref::random_f32(d.c, seed + 3, -0.2, 0.2);
  d.running_var = test::ref::random_f32(d.c, seed + 4, 0.5, 2.0);
  d.dy = test::ref::random_f32(n, seed + 5);
  d.xt = test::f32_tensor(d.x, fc.shape);
  if (fc.residual) d.rt = test::f32_tensor(d.residual, fc.shape);
  d.wt = test::f32_tensor(d.weight, {d.c});
  d.bt = test::f32_tensor(d.bias, {d.c});
  d.dyt = test::f32_tensor(d.dy, fc.shape);
  return d;
}

// relu(bn_train(x) + r) in double.
Values reference_forward(const Values& x, const Values& r, int64_t c, const Values& w,
                         const Values& b) {
  Values y = test::ref::batch_norm_train(x, c, w, b, kEps).y;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!r.empty()) y[i] += r[i];
    y[i] = y[i] > 0 ? y[i] : 0;
  }
  return y;
}

// dy where y > 0, else 0.
Values masked(const Values& dy, const Values& y) {
  Values dz(dy.size());
  for (size_t i = 0; i < dy.size(); ++i) dz[i] = y[i] > 0 ? dy[i] : 0;
  return dz;
}

class BatchNormReluCase : public ::testing::TestWithParam<FusedCase> {};

TEST_P(BatchNormReluCase, TrainMatchesReferenceAndUpdatesRunningStats) {
  const FusedCase& fc = GetParam();
  const Data d = make_data(fc, 3);
  Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const ops::BatchNormForward out = ops::batch_norm_train(d.xt, d.wt, d.bt, rm, rv, kMomentum, kEps,
                                                          {.relu = true, .residual = d.rt});
  const test::ref::BatchNormTrain bn =
      test::ref::batch_norm_train(d.x, d.c, d.weight, d.bias, kEps);
  const Values want = reference_forward(d.x, d.residual, d.c, d.weight, d.bias);
  ASSERT_EQ(out.y.shape(), fc.shape);
  // As batch_norm_train's test: statistics are sums over M = N*H*W values; the add and the
  // ReLU add one rounding (the add) to each output, well inside an M-long reduction's bound.
  const int64_t m = shape_numel(fc.shape) / d.c;
  EXPECT_TRUE(test::all_close(out.y, want, test::ref::f32_tolerance(m, want))) << "y";
  EXPECT_TRUE(test::all_close(out.mean, bn.mean, test::ref::f32_tolerance(m, bn.mean)));
  EXPECT_TRUE(test::all_close(out.invstd, bn.invstd, test::ref::f32_tolerance(m, bn.invstd)));
  Values want_mean, want_var;
  for (int64_t j = 0; j < d.c; ++j) {
    want_mean.push_back((1 - kMomentum) * d.running_mean[j] + kMomentum * bn.mean[j]);
    want_var.push_back((1 - kMomentum) * d.running_var[j] + kMomentum * bn.var_unbiased[j]);
  }
  EXPECT_TRUE(test::all_close(rm, want_mean, test::ref::f32_tolerance(m, want_mean)));
  EXPECT_TRUE(test::all_close(rv, want_var, test::ref::f32_tolerance(m, want_var)));
  // The ReLU did clip: some outputs are exactly zero, some positive.
  const std::vector<float> y = out.y.to_vector<float>();
  EXPECT_GT(std::count(y.begin(), y.end(), 0.0f), 0);
  EXPECT_GT(std::count_if(y.begin(), y.end(), [](float v) { return v > 0; }), 0);
}

TEST_P(BatchNormReluCase, BackwardMatchesReference) {
  const FusedCase& fc = GetParam();
  const Data d = make_data(fc, 7);
  Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const ops::BatchNormForward f = ops::batch_norm_train(d.xt, d.wt, d.bt, rm, rv, kMomentum, kEps,
                                                        {.relu = true, .residual = d.rt});
  const ResidualGrad rg = fc.residual ? ResidualGrad::Compute : ResidualGrad::Skip;
  const ops::BatchNormGrads g = ops::batch_norm_backward(d.dyt, d.xt, d.wt, f.mean, f.invstd,
                                                         {.relu_output = f.y, .residual_grad = rg});
  // The mask comes from the op's own y (the reference's y may differ in which values are
  // exactly zero only by rounding at the kink).
  const Values dz = masked(d.dy, test::to_doubles(f.y));
  const test::ref::BatchNormGrads ref =
      test::ref::batch_norm_backward(dz, d.x, d.c, d.weight, kEps);
  const int64_t m = shape_numel(fc.shape) / d.c;
  EXPECT_TRUE(test::all_close(g.dx, ref.dx, test::ref::f32_tolerance(m, ref.dx))) << "dx";
  EXPECT_TRUE(test::all_close(g.dweight, ref.dweight, test::ref::f32_tolerance(m, ref.dweight)));
  EXPECT_TRUE(test::all_close(g.dbias, ref.dbias, test::ref::f32_tolerance(m, ref.dbias)));
  if (fc.residual) {
    ASSERT_TRUE(g.dresidual.defined());
    EXPECT_EQ(test::to_doubles(g.dresidual), dz) << "dresidual is the masked gradient exactly";
  } else {
    EXPECT_FALSE(g.dresidual.defined());
  }
}

// A gradient in two parts (a value used twice): the gradients of dy + dy2, against the float64
// reference of the summed gradient.
TEST_P(BatchNormReluCase, GradientInTwoPartsMatchesReference) {
  const FusedCase& fc = GetParam();
  const Data d = make_data(fc, 13);
  const Values dy2 = test::ref::random_f32(d.dy.size(), 14);
  Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const ops::BatchNormForward f = ops::batch_norm_train(d.xt, d.wt, d.bt, rm, rv, kMomentum, kEps,
                                                        {.relu = true, .residual = d.rt});
  const ResidualGrad rg = fc.residual ? ResidualGrad::Compute : ResidualGrad::Skip;
  const ops::BatchNormGrads g = ops::batch_norm_backward(
      d.dyt, d.xt, d.wt, f.mean, f.invstd,
      {.relu_output = f.y, .dy2 = test::f32_tensor(dy2, fc.shape), .residual_grad = rg});
  Values sum(d.dy.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = d.dy[i] + dy2[i];
  const Values dz = masked(sum, test::to_doubles(f.y));
  const test::ref::BatchNormGrads ref =
      test::ref::batch_norm_backward(dz, d.x, d.c, d.weight, kEps);
  const int64_t m = shape_numel(fc.shape) / d.c;
  EXPECT_TRUE(test::all_close(g.dx, ref.dx, test::ref::f32_tolerance(m, ref.dx))) << "dx";
  EXPECT_TRUE(test::all_close(g.dweight, ref.dweight, test::ref::f32_tolerance(m, ref.dweight)));
  EXPECT_TRUE(test::all_close(g.dbias, ref.dbias, test::ref::f32_tolerance(m, ref.dbias)));
  if (fc.residual)
    EXPECT_TRUE(test::all_close(g.dresidual, dz, test::ref::f32_tolerance(1, dz)))
        << "dresidual is the masked sum, rounded once";
}

// loss = sum(relu(bn(x) + r) * g) in double against central differences. The ReLU's kink makes
// the loss only piecewise smooth: a step of 1e-6 crosses it only for a pre-activation within
// about 1e-6 of zero (none for these seeds), and the error elsewhere is step^2 (truncation)
// plus 1e-16 |loss| / step (rounding), both far below the tolerance.
TEST_P(BatchNormReluCase, ReferenceBackwardMatchesFiniteDifferences) {
  const FusedCase& fc = GetParam();
  const Data d = make_data(fc, 9);
  const Values& g = d.dy;
  const Values y = reference_forward(d.x, d.residual, d.c, d.weight, d.bias);
  const Values dz = masked(g, y);
  const test::ref::BatchNormGrads ref =
      test::ref::batch_norm_backward(dz, d.x, d.c, d.weight, kEps);
  const auto loss = [&](const Values& x, const Values& r, const Values& w, const Values& b) {
    return test::ref::dot(reference_forward(x, r, d.c, w, b), g);
  };
  const double step = 1e-6;
  Values got, want;
  for (size_t i : test::ref::sample_indices(d.x.size(), 12, 3)) {
    got.push_back(ref.dx[i]);
    want.push_back(test::ref::finite_difference(
        [&](const Values& x) { return loss(x, d.residual, d.weight, d.bias); }, d.x, i, step));
    if (fc.residual) {
      got.push_back(dz[i]);  // dresidual
      want.push_back(test::ref::finite_difference(
          [&](const Values& r) { return loss(d.x, r, d.weight, d.bias); }, d.residual, i, step));
    }
  }
  for (size_t j = 0; j < size_t(d.c); ++j) {
    got.push_back(ref.dweight[j]);
    want.push_back(test::ref::finite_difference(
        [&](const Values& w) { return loss(d.x, d.residual, w, d.bias); }, d.weight, j, step));
    got.push_back(ref.dbias[j]);
    want.push_back(test::ref::finite_difference(
        [&](const Values& b) { return loss(d.x, d.residual, d.weight, b); }, d.bias, j, step));
  }
  EXPECT_TRUE(test::all_close(got, want, test::Tolerance{1e-5, 1e-5}));
}

// The forward's ReLU mask: bit c % 8 of byte [row, c / 8] is y[row, c] > 0, every other bit
// (past the last channel) zero; and the backward from the mask gives the bits it gives from y.
TEST_P(BatchNormReluCase, MaskIsTheOutputAboveZeroAndBacksTheSameGradients) {
  const FusedCase& fc = GetParam();
  const Data d = make_data(fc, 17);
  Tensor rm = test::f32_tensor(d.running_mean, {d.c});
  Tensor rv = test::f32_tensor(d.running_var, {d.c});
  const ops::BatchNormForward f = ops::batch_norm_train(d.xt, d.wt, d.bt, rm, rv, kMomentum, kEps,
                                                        {.relu = true, .residual = d.rt});
  const int64_t rows = shape_numel(fc.shape) / d.c, stride = ops::relu_mask_bytes(d.c);
  ASSERT_TRUE(f.mask.defined());
  ASSERT_EQ(f.mask.dtype(), DType::U8);
  ASSERT_EQ(f.mask.shape(), (Shape{rows, stride}));
  const Values y = test::to_doubles(f.y);
  const uint8_t* m = static_cast<const uint8_t*>(f.mask.data_ptr());
  int64_t wrong = 0, set = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t byte = 0; byte < stride; ++byte) {
      for (int64_t bit = 0; bit < 8; ++bit) {
        const int64_t c = byte * 8 + bit;
        const bool want = c < d.c && y[size_t(r * d.c + c)] > 0;
        const bool got = (m[r * stride + byte] >> bit) & 1;
        wrong += got != want;
        set += got;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(set, 0);
  EXPECT_LT(set, rows * d.c);
  const ResidualGrad rg = fc.residual ? ResidualGrad::Compute : ResidualGrad::Skip;
  const ops::BatchNormGrads from_y = ops::batch_norm_backward(
      d.dyt, d.xt, d.wt, f.mean, f.invstd, {.relu_output = f.y, .residual_grad = rg});
  const ops::BatchNormGrads from_mask = ops::batch_norm_backward(
      d.dyt, d.xt, d.wt, f.mean, f.invstd, {.relu_output = f.mask, .residual_grad = rg});
  EXPECT_EQ(test::to_doubles(from_mask.dx), test::to_doubles(from_y.dx));
  EXPECT_EQ(test::to_doubles(from_mask.dweight), test::to_doubles(from_y.dweight));
  EXPECT_EQ(test::to_doubles(from_mask.dbias), test::to_doubles(from_y.dbias));
  if (fc.residual)
    EXPECT_EQ(test::to_doubles(from_mask.dresidual), test::to_doubles(from_y.dresidual));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormReluCase, ::testing::ValuesIn(fused_cases()),
                         [](const ::testing::TestParamInfo<FusedCase>& info) {
                           return std::string(info.param.name);
                         });

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The CPU's fused ops compose the unfused kernels: same bits as batch_norm_train, add, relu,
// relu_backward and batch_norm_backward called one by one (what the ResNet trains with when
// fusion is off).
TEST(BatchNormRelu, CpuIsBitIdenticalToTheUnfusedOps) {
  const FusedCase fc{"big", {8, 16, 16, 40}, true};
  const Data d = make_data(fc, 13);
  Tensor rm1 = test::f32_tensor(d.running_mean, {d.c}),
         rv1 = test::f32_tensor(d.running_var, {d.c});
  Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
  const ops::BatchNormForward fused = ops::batch_norm_train(d.xt, d.wt, d.bt, rm1, rv1, kMomentum,
                                                            kEps, {.relu = true, .residual = d.rt});
  const ops::BatchNormForward bn =
      ops::batch_norm_train(d.xt, d.wt, d.bt, rm2, rv2, kMomentum, kEps);
  const Tensor y = ops::relu(ops::add(bn.y, d.rt));
  EXPECT_TRUE(same_bits(fused.y, y));
  EXPECT_TRUE(same_bits(rm1, rm2) && same_bits(rv1, rv2));
  EXPECT_TRUE(same_bits(fused.mean, bn.mean) && same_bits(fused.invstd, bn.invstd));
  const ops::BatchNormGrads g =
      ops::batch_norm_backward(d.dyt, d.xt, d.wt, fused.mean, fused.invstd,
                               {.relu_output = fused.y, .residual_grad = ResidualGrad::Compute});
  const Tensor dz = ops::relu_backward(d.dyt, y);
  const ops::BatchNormGrads gu = ops::batch_norm_backward(dz, d.xt, d.wt, bn.mean, bn.invstd);
  EXPECT_TRUE(same_bits(g.dx, gu.dx));
  EXPECT_TRUE(same_bits(g.dweight, gu.dweight));
  EXPECT_TRUE(same_bits(g.dbias, gu.dbias));
  EXPECT_TRUE(same_bits(g.dresidual, dz));
}

TEST(BatchNormRelu, BadArgumentsAreInvalidInput) {
  const Tensor x = Tensor::zeros({2, 3, 3, 4});
  const Tensor w = Tensor::full({4}, 1.0), b = Tensor::zeros({4});
  Tensor rm = Tensor::zeros({4}), rv = Tensor::full({4}, 1.0);
  // Residual of another shape or dtype.
  EXPECT_INVALID_INPUT(ops::batch_norm_train(
      x, w, b, rm, rv, 0.1, 1e-5, {.relu = true, .residual = Tensor::zeros({2, 3, 3, 5})}));
  EXPECT_INVALID_INPUT(ops::batch_norm_train(x, w, b, rm, rv, 0.1, 1e-5,
                                             {.relu = true, .residual = x.to(DType::F64)}));
  // Parameter of the wrong length; one value per channel.
  EXPECT_INVALID_INPUT(
      ops::batch_norm_train(x, Tensor::full({3}, 1.0), b, rm, rv, 0.1, 1e-5, {.relu = true}));
  EXPECT_INVALID_INPUT(
      ops::batch_norm_train(Tensor::zeros({1, 4}), w, b, rm, rv, 0.1, 1e-5, {.relu = true}));
  // Backward: grad or fused output of another shape.
  EXPECT_INVALID_INPUT(
      ops::batch_norm_backward(Tensor::zeros({2, 3, 3, 5}), x, w, rm, rv, {.relu_output = x}));
  EXPECT_INVALID_INPUT(
      ops::batch_norm_backward(x, x, w, rm, rv, {.relu_output = Tensor::zeros({2, 3, 3, 5})}));
  // A ReLU mask of another shape (18 rows of 4 channels take [18, 1] bytes).
  EXPECT_INVALID_INPUT(ops::batch_norm_backward(
      x, x, w, rm, rv, {.relu_output = Tensor::zeros({18, 2}, DType::U8)}));
  EXPECT_INVALID_INPUT(
      ops::batch_norm_backward(x, x, w, rm, rv, {.relu_output = Tensor::zeros({9, 1}, DType::U8)}));
  // Fusions the family does not have: a residual without the ReLU, a residual and a shortcut;
  // a second gradient part or a residual's gradient without the forward's ReLU output.
  EXPECT_INVALID_INPUT(ops::batch_norm_train(x, w, b, rm, rv, 0.1, 1e-5, {.residual = x}));
  Tensor rm2 = Tensor::zeros({4}), rv2 = Tensor::full({4}, 1.0);
  EXPECT_INVALID_INPUT(ops::batch_norm_train(
      x, w, b, rm, rv, 0.1, 1e-5, {.relu = true, .residual = x, .shortcut = {x, w, b, rm2, rv2}}));
  EXPECT_INVALID_INPUT(ops::batch_norm_backward(x, x, w, rm, rv, {.dy2 = x}));
  EXPECT_INVALID_INPUT(
      ops::batch_norm_backward(x, x, w, rm, rv, {.residual_grad = ResidualGrad::Compute}));
}

}  // namespace
}  // namespace hg
