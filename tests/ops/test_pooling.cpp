// Max, average and global average pooling through hg::ops on the CPU backend, against the
// float64 reference; the reference's backward against finite differences; argument errors.
#include <gtest/gtest.h>

#include <cstring>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/reference_conv_pool.h"

namespace hg {
namespace {

using test::ref::PoolShape;
using test::ref::Values;

struct PoolCase {
  const char* name;
  PoolShape shape;
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

PoolShape pool_shape(int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh, int64_t kw, int64_t sh,
                     int64_t sw, int64_t ph, int64_t pw) {
  return PoolShape{n, h, w, c, Pool2dParams{kh, kw, sh, sw, ph, pw}};
}

// Non-overlapping and overlapping windows, padding (which average pooling counts), odd sizes
// where the floor drops the last row/column, batch 1, 7x7 maps, asymmetric windows, channel
// counts off multiples of 8.
std::vector<PoolCase> pool_cases() {
  return {
      {"k2s2", pool_shape(2, 8, 8, 5, 2, 2, 2, 2, 0, 0)},
      {"k3s2p1_odd_batch1", pool_shape(1, 9, 9, 3, 3, 3, 2, 2, 1, 1)},
      {"k3s1p1_7x7", pool_shape(2, 7, 7, 10, 3, 3, 1, 1, 1, 1)},
      {"asymmetric", pool_shape(2, 9, 8, 4, 3, 2, 2, 1, 1, 0)},
      {"k2s2_floor_drops_edge", pool_shape(3, 7, 5, 17, 2, 2, 2, 2, 0, 0)},
      {"whole_map", pool_shape(1, 4, 4, 6, 4, 4, 4, 4, 0, 0)},
      {"c64_k3s2p1", pool_shape(2, 8, 8, 64, 3, 3, 2, 2, 1, 1)},
  };
}

struct PoolData {
  Values x, dy;
  Tensor xt, dyt;
};

PoolData make_data(const PoolShape& sh, uint64_t seed) {
  PoolData d;
  d.x = test::ref::random_f32(shape_numel(sh.x_shape()), seed);
  d.dy = test::ref::random_f32(shape_numel(sh.y_shape()), seed + 1);
  d.xt = test::f32_tensor(d.x, sh.x_shape());
  d.dyt = test::f32_tensor(d.dy, sh.y_shape());
  return d;
}

class PoolCaseTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolCaseTest, MaxPoolMatchesReference) {
  const PoolShape& sh = GetParam().shape;
  const PoolData d = make_data(sh, 3);
  const ops::MaxPoolForward out = ops::max_pool2d(d.xt, sh.p);
  ASSERT_EQ(out.y.shape(), sh.y_shape());
  // A maximum is one of the inputs: no rounding at all (length 1 is the tightest tolerance).
  const Values ref_y = test::ref::max_pool2d(d.x, sh);
  EXPECT_TRUE(test::all_close(out.y, ref_y, test::ref::f32_tolerance(1, ref_y)));
  const Tensor dx = ops::max_pool2d_backward(d.dyt, d.xt, out.workspace, sh.p);
  ASSERT_EQ(dx.shape(), sh.x_shape());
  // An input element collects the gradients of every window it is the maximum of: at most
  // kernel_h * kernel_w of them (overlapping windows).
  const Values ref_dx = test::ref::max_pool2d_backward(d.dy, d.x, sh);
  EXPECT_TRUE(
      test::all_close(dx, ref_dx, test::ref::f32_tolerance(sh.p.kernel_h * sh.p.kernel_w, ref_dx)));
}

TEST_P(PoolCaseTest, AvgPoolMatchesReference) {
  const PoolShape& sh = GetParam().shape;
  const PoolData d = make_data(sh, 5);
  const int64_t area = sh.p.kernel_h * sh.p.kernel_w;
  const Tensor y = ops::avg_pool2d(d.xt, sh.p);
  ASSERT_EQ(y.shape(), sh.y_shape());
  // Each output sums at most kernel_h * kernel_w inputs.
  const Values ref_y = test::ref::avg_pool2d(d.x, sh);
  EXPECT_TRUE(test::all_close(y, ref_y, test::ref::f32_tolerance(area, ref_y)));
  // Each input receives a share from at most kernel_h * kernel_w windows.
  const Tensor dx = ops::avg_pool2d_backward(d.dyt, d.xt, sh.p);
  const Values ref_dx = test::ref::avg_pool2d_backward(d.dy, sh);
  EXPECT_TRUE(test::all_close(dx, ref_dx, test::ref::f32_tolerance(area, ref_dx)));
}

// loss = sum(y * r). Average pooling is linear and max pooling piecewise linear (random
// inputs have no near-ties within the step), so central differences are exact up to float64
// rounding.
TEST_P(PoolCaseTest, ReferenceBackwardMatchesFiniteDifferences) {
  const PoolShape& sh = GetParam().shape;
  const PoolData d = make_data(sh, 7);
  const Values& r = d.dy;
  const Values max_dx = test::ref::max_pool2d_backward(r, d.x, sh);
  const Values avg_dx = test::ref::avg_pool2d_backward(r, sh);
  const auto max_loss = [&](const Values& x) {
    return test::ref::dot(test::ref::max_pool2d(x, sh), r);
  };
  const auto avg_loss = [&](const Values& x) {
    return test::ref::dot(test::ref::avg_pool2d(x, sh), r);
  };
  Values got, want;
  for (size_t i : test::ref::sample_indices(d.x.size(), 24, 5)) {
    got.push_back(max_dx[i]);
    want.push_back(test::ref::finite_difference(max_loss, d.x, i, 1e-7));
    got.push_back(avg_dx[i]);
    want.push_back(test::ref::finite_difference(avg_loss, d.x, i, 1e-3));
  }
  EXPECT_TRUE(test::all_close(got, want, test::Tolerance{1e-7, 1e-7}));
}

TEST_P(PoolCaseTest, RepeatedRunsAreBitIdentical) {
  const PoolShape& sh = GetParam().shape;
  const PoolData d = make_data(sh, 9);
  const auto run = [&] {
    const ops::MaxPoolForward m = ops::max_pool2d(d.xt, sh.p);
    std::vector<std::vector<float>> out;
    for (const Tensor& t :
         {m.y, ops::max_pool2d_backward(d.dyt, d.xt, m.workspace, sh.p),
          ops::avg_pool2d(d.xt, sh.p), ops::avg_pool2d_backward(d.dyt, d.xt, sh.p)})
      out.push_back(t.to_vector<float>());
    return out;
  };
  const auto a = run(), b = run();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float))) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolCaseTest, ::testing::ValuesIn(pool_cases()),
                         [](const ::testing::TestParamInfo<PoolCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(AvgPool, PaddingCountsInTheDivisor) {
  // A 2x2 input of ones, 3x3 window, padding 1: the corner windows see 4 ones out of 9.
  const Tensor x = Tensor::full({1, 2, 2, 1}, 1.0);
  const Tensor y = ops::avg_pool2d(x, Pool2dParams{3, 3, 1, 1, 1, 1});
  EXPECT_TRUE(test::all_close(y, Values(4, 4.0 / 9.0), test::tolerance_for(DType::F32, 9)));
}

struct GlobalCase {
  int64_t n, h, w, c;
};

TEST(GlobalAvgPool, MatchesReference) {
  for (const GlobalCase& gc : {GlobalCase{2, 7, 7, 10}, GlobalCase{1, 1, 1, 3},
                               GlobalCase{3, 4, 5, 17}, GlobalCase{2, 4, 4, 512}}) {
    SCOPED_TRACE(shape_str({gc.n, gc.h, gc.w, gc.c}));
    const Values x = test::ref::random_f32(gc.n * gc.h * gc.w * gc.c, 11);
    const Values dy = test::ref::random_f32(gc.n * gc.c, 12);
    const Tensor xt = test::f32_tensor(x, {gc.n, gc.h, gc.w, gc.c});
    const Tensor y = ops::global_avg_pool(xt);
    ASSERT_EQ(y.shape(), (Shape{gc.n, gc.c}));
    // Each output sums the H*W values of its channel.
    const Values ref_y = test::ref::global_avg_pool(x, gc.n, gc.h, gc.w, gc.c);
    EXPECT_TRUE(test::all_close(y, ref_y, test::ref::f32_tolerance(gc.h * gc.w, ref_y)));
    // Each input gradient is one division: length 1.
    const Tensor dx = ops::global_avg_pool_backward(test::f32_tensor(dy, {gc.n, gc.c}), xt);
    ASSERT_EQ(dx.shape(), xt.shape());
    const Values ref_dx = test::ref::global_avg_pool_backward(dy, gc.n, gc.h, gc.w, gc.c);
    EXPECT_TRUE(test::all_close(dx, ref_dx, test::ref::f32_tolerance(1, ref_dx)));

    // The reference backward is the derivative of the reference forward (a linear map).
    const auto loss = [&](const Values& v) {
      return test::ref::dot(test::ref::global_avg_pool(v, gc.n, gc.h, gc.w, gc.c), dy);
    };
    Values got, want;
    for (size_t i : test::ref::sample_indices(x.size(), 10, 13)) {
      got.push_back(ref_dx[i]);
      want.push_back(test::ref::finite_difference(loss, x, i, 1e-3));
    }
    EXPECT_TRUE(test::all_close(got, want, test::Tolerance{1e-8, 1e-8}));
  }
}

TEST(Pooling, BadArgumentsAreInvalidInput) {
  const Tensor x = Tensor::zeros({2, 6, 6, 3});
  const Pool2dParams k2{2, 2, 2, 2, 0, 0};
  // Kernel larger than the input; padding more than half the kernel; zero stride; 3-D input.
  EXPECT_INVALID_INPUT(ops::max_pool2d(x, Pool2dParams{7, 7, 1, 1, 0, 0}));
  EXPECT_INVALID_INPUT(ops::avg_pool2d(x, Pool2dParams{2, 2, 2, 2, 2, 2}));
  EXPECT_INVALID_INPUT(ops::max_pool2d(x, Pool2dParams{2, 2, 0, 2, 0, 0}));
  EXPECT_INVALID_INPUT(ops::avg_pool2d(Tensor::zeros({6, 6, 3}), k2));
  // f64: the CPU backend computes in f32 only.
  EXPECT_INVALID_INPUT(ops::max_pool2d(x.to(DType::F64), k2));
  // Grad output of the wrong shape.
  const ops::MaxPoolForward m = ops::max_pool2d(x, k2);
  EXPECT_INVALID_INPUT(ops::max_pool2d_backward(Tensor::zeros({2, 3, 3, 4}), x, m.workspace, k2));
  EXPECT_INVALID_INPUT(ops::avg_pool2d_backward(Tensor::zeros({2, 2, 3, 3}), x, k2));
  // A workspace that max_pool2d did not produce for these parameters.
  const Pool2dParams k3{3, 3, 1, 1, 1, 1};
  const ops::MaxPoolForward other = ops::max_pool2d(x, k3);
  EXPECT_INVALID_INPUT(ops::max_pool2d_backward(m.y, x, other.workspace, k2));
  EXPECT_INVALID_INPUT(ops::max_pool2d_backward(m.y, x, m.y, k2));
  // Global pooling: not 4-D; grad of the wrong shape.
  EXPECT_INVALID_INPUT(ops::global_avg_pool(Tensor::zeros({2, 3})));
  EXPECT_INVALID_INPUT(ops::global_avg_pool_backward(Tensor::zeros({2, 4}), x));
}

}  // namespace
}  // namespace hg
