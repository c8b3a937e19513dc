// conv2d through hg::ops on the CPU backend, against the float64 reference; the reference's
// backward against finite differences; argument errors; determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "hourglass/base/parallel.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/reference_conv_pool.h"

namespace hg {
namespace {

using test::ref::ConvShape;
using test::ref::Values;

struct ConvCase {
  const char* name;
  ConvShape shape;
  bool bias;
};
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

ConvShape conv_shape(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t r, int64_t s,
                     int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return ConvShape{n, h, w, c, k, r, s, p};
}

ConvShape asymmetric_shape() {
  ConvShape sh = conv_shape(2, 9, 8, 4, 3, 3, 2, 1, 0);
  sh.p.stride_h = 2;
  sh.p.pad_h = 1;
  sh.p.dilation_w = 2;
  return sh;
}

// Odd sizes, batch 1, 7x7 and 4x4 maps, channel counts off multiples of 8/16, stride 2,
// padding, dilation 2, groups (2, 4, depthwise), 1x1 and 7x7 kernels, with and without bias.
// The 3-channel cases take the kernel's blocked-activation path, the 4x4 map its small-map one.
std::vector<ConvCase> conv_cases() {
  return {
      {"basic3x3_bias", conv_shape(2, 7, 7, 5, 6, 3, 3, 1, 1), true},
      {"odd_stride2", conv_shape(1, 9, 11, 3, 4, 3, 3, 2, 1), false},
      {"dilation2", conv_shape(2, 10, 9, 6, 5, 3, 3, 1, 2, 2), true},
      {"groups2", conv_shape(2, 8, 8, 6, 10, 3, 3, 1, 1, 1, 2), true},
      {"depthwise_stride2", conv_shape(2, 9, 9, 12, 12, 3, 3, 2, 1, 1, 12), false},
      {"depthwise_multiplier2", conv_shape(1, 7, 7, 8, 16, 3, 3, 1, 1, 1, 8), true},
      {"pointwise", conv_shape(3, 5, 5, 20, 17, 1, 1, 1, 0), true},
      {"pointwise_stride2", conv_shape(2, 8, 8, 16, 24, 1, 1, 2, 0), false},
      {"stem7x7_stride2", conv_shape(1, 15, 15, 3, 8, 7, 7, 2, 3), false},
      {"map7x7_c64", conv_shape(2, 7, 7, 64, 64, 3, 3, 1, 1), true},
      {"map4x4_c40", conv_shape(3, 4, 4, 40, 24, 3, 3, 1, 1), false},
      {"asymmetric", asymmetric_shape(), true},
      {"valid_no_padding", conv_shape(2, 6, 6, 9, 7, 3, 3, 1, 0), false},
      {"one_channel", conv_shape(1, 5, 5, 1, 3, 3, 3, 1, 1), true},
      {"groups4_dilation2_stride2", conv_shape(2, 11, 11, 8, 12, 3, 3, 2, 2, 2, 4), false},
      {"resnet_downsample", conv_shape(4, 8, 8, 16, 32, 3, 3, 2, 1), true},
  };
}

// Inputs of order 1 and weights scaled by 1/sqrt(fan-in), so outputs and input gradients are
// of order 1 too (what tolerance_for assumes); all rounded to f32.
struct ConvData {
  Values x, w, bias, dy;
  Tensor xt, wt, bt, dyt;
};

ConvData make_data(const ConvShape& sh, bool with_bias, uint64_t seed) {
  ConvData d;
  const int64_t fan_in = sh.c / sh.p.groups * sh.r * sh.s;
  const double a = std::sqrt(3.0 / double(fan_in));
  d.x = test::ref::random_f32(shape_numel(sh.x_shape()), seed);
  d.w = test::ref::random_f32(shape_numel(sh.w_shape()), seed + 1, -a, a);
  d.dy = test::ref::random_f32(shape_numel(sh.y_shape()), seed + 2);
  d.xt = test::f32_tensor(d.x, sh.x_shape());
  d.wt = test::f32_tensor(d.w, sh.w_shape());
  d.dyt = test::f32_tensor(d.dy, sh.y_shape());
  if (with_bias) {
    d.bias = test::ref::random_f32(sh.k, seed + 3);
    d.bt = test::f32_tensor(d.bias, {sh.k});
  }
  return d;
}

class Conv2dCase : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dCase, ForwardMatchesReference) {
  const ConvCase& cs = GetParam();
  const ConvShape& sh = cs.shape;
  const ConvData d = make_data(sh, cs.bias, 11);
  const Tensor y = ops::conv2d(d.xt, d.wt, d.bt, sh.p);
  ASSERT_EQ(y.shape(), sh.y_shape());
  ASSERT_EQ(y.dtype(), DType::F32);
  EXPECT_TRUE(y.is_contiguous());
  const Values ref = test::ref::conv2d(d.x, d.w, d.bias, sh);
  // Each output is a sum over (C/groups) input channels x R x S kernel taps, plus the bias.
  const int64_t length = sh.c / sh.p.groups * sh.r * sh.s + 1;
  EXPECT_TRUE(test::all_close(y, ref, test::ref::f32_tolerance(length, ref)));
}

TEST_P(Conv2dCase, BackwardMatchesReference) {
  const ConvCase& cs = GetParam();
  const ConvShape& sh = cs.shape;
  const ConvData d = make_data(sh, cs.bias, 23);
  const ops::Conv2dGrads g =
      ops::conv2d_backward(d.dyt, d.xt, d.wt, cs.bias, sh.p, InputGrad::Compute);
  const test::ref::ConvGrads ref = test::ref::conv2d_backward(d.dy, d.x, d.w, sh);
  ASSERT_TRUE(g.dx.defined());
  ASSERT_EQ(g.dx.shape(), sh.x_shape());
  ASSERT_EQ(g.dw.shape(), sh.w_shape());
  // dx: an input element receives at most (K/groups) x R x S products (fewer with stride).
  EXPECT_TRUE(test::all_close(g.dx, ref.dx,
                              test::ref::f32_tolerance(sh.k / sh.p.groups * sh.r * sh.s, ref.dx)))
      << "dx";
  // dw and dbias: sums over every output position, N x P x Q terms.
  const int64_t positions = sh.n * sh.out_h() * sh.out_w();
  EXPECT_TRUE(test::all_close(g.dw, ref.dw, test::ref::f32_tolerance(positions, ref.dw))) << "dw";
  if (cs.bias) {
    ASSERT_TRUE(g.dbias.defined());
    EXPECT_TRUE(test::all_close(g.dbias, ref.dbias, test::ref::f32_tolerance(positions, ref.dbias)))
        << "dbias";
  } else {
    EXPECT_FALSE(g.dbias.defined());
  }
}

TEST_P(Conv2dCase, SkippedInputGradLeavesWeightGrads) {
  const ConvCase& cs = GetParam();
  const ConvShape& sh = cs.shape;
  const ConvData d = make_data(sh, cs.bias, 37);
  const ops::Conv2dGrads g =
      ops::conv2d_backward(d.dyt, d.xt, d.wt, cs.bias, sh.p, InputGrad::Skip);
  EXPECT_FALSE(g.dx.defined());
  const test::ref::ConvGrads ref = test::ref::conv2d_backward(d.dy, d.x, d.w, sh);
  const int64_t positions = sh.n * sh.out_h() * sh.out_w();
  EXPECT_TRUE(test::all_close(g.dw, ref.dw, test::ref::f32_tolerance(positions, ref.dw)));
}

// The reference's backward is the derivative of its forward: loss = sum(y * r) for random r,
// so dloss/dx = conv2d_backward(r).dx etc. The loss is linear in each argument, so central
// differences are exact up to float64 rounding of the loss (~1e-16 * |loss| / step).
TEST_P(Conv2dCase, ReferenceBackwardMatchesFiniteDifferences) {
  const ConvCase& cs = GetParam();
  const ConvShape& sh = cs.shape;
  const ConvData d = make_data(sh, cs.bias, 41);
  const Values& r = d.dy;
  const test::ref::ConvGrads g = test::ref::conv2d_backward(r, d.x, d.w, sh);
  const test::Tolerance tol{1e-8, 1e-8};
  const double step = 1e-3;

  const auto loss = [&](const Values& x, const Values& w, const Values& b) {
    return test::ref::dot(test::ref::conv2d(x, w, b, sh), r);
  };
  const auto loss_x = [&](const Values& x) { return loss(x, d.w, d.bias); };
  const auto loss_w = [&](const Values& w) { return loss(d.x, w, d.bias); };
  const auto loss_b = [&](const Values& b) { return loss(d.x, d.w, b); };
  Values got, want;
  for (size_t i : test::ref::sample_indices(d.x.size(), 12, 1)) {
    got.push_back(g.dx[i]);
    want.push_back(test::ref::finite_difference(loss_x, d.x, i, step));
  }
  for (size_t i : test::ref::sample_indices(d.w.size(), 12, 2)) {
    got.push_back(g.dw[i]);
    want.push_back(test::ref::finite_difference(loss_w, d.w, i, step));
  }
  if (cs.bias)
    for (size_t i = 0; i < d.bias.size(); ++i) {
      got.push_back(g.dbias[i]);
      want.push_back(test::ref::finite_difference(loss_b, d.bias, i, step));
    }
  EXPECT_TRUE(test::all_close(got, want, tol));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dCase, ::testing::ValuesIn(conv_cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) {
                           return std::string(info.param.name);
                         });

// More OpenMP threads than images: oneDNN 2.6's 1x1 backward-weights kernel wrote past a buffer
// there (heap corruption at the next allocation), so conv2d_backward runs it on one thread per
// image. The shape is tiny_resnet's shortcut at a micro-batch of 16 images on 17 threads.
TEST(Conv2d, BackwardOnMoreThreadsThanImagesMatchesReference) {
  const int saved_threads = num_threads();
  set_num_threads(17);
  const ConvShape sh = conv_shape(16, 16, 16, 8, 16, 1, 1, 2, 0);
  const ConvData d = make_data(sh, false, 31);
  const test::ref::ConvGrads ref = test::ref::conv2d_backward(d.dy, d.x, d.w, sh);
  const int64_t positions = sh.n * sh.out_h() * sh.out_w();
  for (int i = 0; i < 3; ++i) {
    const ops::Conv2dGrads g =
        ops::conv2d_backward(d.dyt, d.xt, d.wt, false, sh.p, InputGrad::Compute);
    EXPECT_TRUE(test::all_close(g.dw, ref.dw, test::ref::f32_tolerance(positions, ref.dw)));
    EXPECT_TRUE(test::all_close(g.dx, ref.dx, test::ref::f32_tolerance(sh.k, ref.dx)));
  }
  EXPECT_EQ(num_threads(), 17) << "the thread count is restored after the call";
  set_num_threads(saved_threads);
}

TEST(Conv2d, NonContiguousInputIsAccepted) {
  // An NCHW tensor permuted to an NHWC view: ops makes it contiguous before the backend.
  const ConvShape sh = conv_shape(2, 6, 5, 4, 3, 3, 3, 1, 1);
  const ConvData d = make_data(sh, false, 5);
  const Tensor nchw = d.xt.permute({0, 3, 1, 2}).contiguous();
  const Tensor view = nchw.permute({0, 2, 3, 1});
  ASSERT_FALSE(view.is_contiguous());
  const Tensor y = ops::conv2d(view, d.wt, Tensor(), sh.p);
  const Values ref = test::ref::conv2d(d.x, d.w, {}, sh);
  EXPECT_TRUE(test::all_close(y, ref, test::ref::f32_tolerance(sh.c * 9, ref)));
}

TEST(Conv2d, RepeatedRunsAreBitIdentical) {
  const ConvShape sh = conv_shape(4, 16, 16, 32, 32, 3, 3, 1, 1);
  const ConvData d = make_data(sh, true, 9);
  const auto run = [&] {
    std::vector<std::vector<float>> out;
    out.push_back(ops::conv2d(d.xt, d.wt, d.bt, sh.p).to_vector<float>());
    const ops::Conv2dGrads g =
        ops::conv2d_backward(d.dyt, d.xt, d.wt, true, sh.p, InputGrad::Compute);
    for (const Tensor* t : {&g.dx, &g.dw, &g.dbias}) out.push_back(t->to_vector<float>());
    return out;
  };
  const auto first = run(), second = run();
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(0, std::memcmp(first[i].data(), second[i].data(), first[i].size() * sizeof(float)))
        << "output " << i;
}

TEST(Conv2d, BadArgumentsAreInvalidInput) {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Tensor x = Tensor::zeros({2, 6, 6, 4});
  const Tensor w = Tensor::zeros({8, 3, 3, 4});
  // Channel mismatch between input and weight.
  EXPECT_INVALID_INPUT(ops::conv2d(x, Tensor::zeros({8, 3, 3, 3}), Tensor(), p));
  // Weight not 4-D, input not 4-D.
  EXPECT_INVALID_INPUT(ops::conv2d(x, Tensor::zeros({8, 36}), Tensor(), p));
  EXPECT_INVALID_INPUT(ops::conv2d(Tensor::zeros({6, 6, 4}), w, Tensor(), p));
  // Groups that do not divide the channels.
  Conv2dParams g3 = p;
  g3.groups = 3;
  EXPECT_INVALID_INPUT(ops::conv2d(x, Tensor::zeros({8, 3, 3, 1}), Tensor(), g3));
  // Bias of the wrong length.
  EXPECT_INVALID_INPUT(ops::conv2d(x, w, Tensor::zeros({7}), p));
  // Kernel larger than the padded input.
  EXPECT_INVALID_INPUT(ops::conv2d(Tensor::zeros({1, 2, 2, 4}), Tensor::zeros({8, 5, 5, 4}),
                                   Tensor(), Conv2dParams{}));
  // Non-positive stride.
  Conv2dParams s0 = p;
  s0.stride_h = 0;
  EXPECT_INVALID_INPUT(ops::conv2d(x, w, Tensor(), s0));
  // f64 passes the op's checks but the CPU backend computes in f32 only.
  EXPECT_INVALID_INPUT(ops::conv2d(x.to(DType::F64), w.to(DType::F64), Tensor(), p));
  // Grad output of the wrong shape.
  EXPECT_INVALID_INPUT(
      ops::conv2d_backward(Tensor::zeros({2, 5, 6, 8}), x, w, false, p, InputGrad::Compute));
}

}  // namespace
}  // namespace hg
