// Elementwise ops on the CPU (f32 and f64) against float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;
using test::tolerance_for;
using Vec = std::vector<double>;

// Sizes: empty, one element, odd, and larger than the parallel grain (runs on several threads).
const int64_t kSizes[] = {0, 1, 7, 1000, 100003};
const DType kDtypes[] = {DType::F32, DType::F64};

// A tensor of `dtype` and the values it actually holds (rounded to f32 for f32), so the
// reference sees exactly the kernel's inputs.
struct Input {
  Tensor t;
  Vec v;
};
Input make_input(int64_t n, uint64_t seed, DType dtype) {
  const Tensor t = Tensor::from_vector(random_values(n, seed, -2.0, 2.0), {n}).to(dtype);
  return {t, to_doubles(t)};
}

Vec map_values(const Vec& a, const std::function<double(double)>& f) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
  return out;
}
Vec map_values(const Vec& a, const Vec& b, const std::function<double(double, double)>& f) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return out;
}

// One rounding per element (two for add_ with alpha): a "reduction" of length 1.
test::Tolerance tol(DType dtype) { return tolerance_for(dtype, 1); }

TEST(Elementwise, BinaryOpsMatchReference) {
  for (DType dt : kDtypes)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Input a = make_input(n, 1, dt), b = make_input(n, 2, dt);
      const Tensor sum = ops::add(a.t, b.t);
      EXPECT_EQ(sum.dtype(), dt);
      EXPECT_EQ(sum.shape(), a.t.shape());
      EXPECT_TRUE(
          all_close(sum, map_values(a.v, b.v, [](double x, double y) { return x + y; }), tol(dt)));
      EXPECT_TRUE(all_close(ops::sub(a.t, b.t),
                            map_values(a.v, b.v, [](double x, double y) { return x - y; }),
                            tol(dt)));
      EXPECT_TRUE(all_close(ops::mul(a.t, b.t),
                            map_values(a.v, b.v, [](double x, double y) { return x * y; }),
                            tol(dt)));
    }
}

TEST(Elementwise, ScalarOpsMatchReference) {
  for (DType dt : kDtypes)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Input a = make_input(n, 3, dt);
      EXPECT_TRUE(all_close(ops::add_scalar(a.t, 0.75),
                            map_values(a.v, [](double x) { return x + 0.75; }), tol(dt)));
      EXPECT_TRUE(all_close(ops::mul_scalar(a.t, -1.5),
                            map_values(a.v, [](double x) { return x * -1.5; }), tol(dt)));
      // The input is untouched by the out-of-place ops.
      EXPECT_EQ(to_doubles(a.t), a.v);
    }
}

TEST(Elementwise, InPlaceOpsMatchReference) {
  for (DType dt : kDtypes)
    for (int64_t n : kSizes)
      for (double alpha : {1.0, 0.5, -3.0}) {
        SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n << " alpha=" << alpha);
        const Input a = make_input(n, 4, dt), b = make_input(n, 5, dt);
        Tensor dst = a.t.clone();
        ops::add_(dst, b.t, alpha);
        EXPECT_TRUE(all_close(
            dst, map_values(a.v, b.v, [&](double x, double y) { return x + alpha * y; }), tol(dt)));
        Tensor scaled = a.t.clone();
        ops::mul_scalar_(scaled, alpha);
        EXPECT_TRUE(
            all_close(scaled, map_values(a.v, [&](double x) { return x * alpha; }), tol(dt)));
      }
}

TEST(Elementwise, AddInPlaceWithItself) {
  // dst and src may be the same tensor (doubling a gradient).
  Tensor t = Tensor::from_vector<float>({1, -2, 3.5f}, {3});
  ops::add_(t, t, 1.0);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{2, -4, 7}));
}

// accumulate_: each destination plus its source (converted to the destination's dtype), against
// a float64 reference; sizes of every kind in one call, f64 sources into f32 destinations and
// the reverse, and the errors: mismatched lists, shapes, a destination given twice.
TEST(Elementwise, AccumulateAddsEachSourceToItsDestination) {
  std::vector<Tensor> dsts, srcs;
  std::vector<Vec> want;
  uint64_t seed = 40;
  for (const int64_t n : kSizes) {
    for (const DType dst_dtype : kDtypes) {
      const DType src_dtype = dst_dtype == DType::F32 ? DType::F64 : DType::F32;
      const Input d = make_input(n, seed++, dst_dtype), s = make_input(n, seed++, src_dtype);
      dsts.push_back(d.t.clone());
      srcs.push_back(s.t);
      // The source converted to the destination's dtype first, as the op converts it.
      const Vec sv = to_doubles(s.t.to(dst_dtype));
      want.push_back(map_values(d.v, sv, [](double a, double b) { return a + b; }));
    }
  }
  ops::accumulate_(dsts, srcs);
  for (size_t i = 0; i < dsts.size(); ++i)
    EXPECT_TRUE(all_close(dsts[i], want[i], tol(dsts[i].dtype()))) << "pair " << i;
  ops::accumulate_({}, {});  // nothing to do
  Tensor a = Tensor::zeros({3}), b = Tensor::zeros({4});
  test::expect_invalid([&] { ops::accumulate_({a}, {}); }, {"1 destinations but 0 sources"});
  test::expect_invalid([&] { ops::accumulate_({a}, {b}); }, {"accumulate_"});
  test::expect_invalid([&] { ops::accumulate_({a, a}, {a, a}); }, {"the same tensor"});
}

TEST(Elementwise, ReluMatchesReference) {
  for (DType dt : kDtypes)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Input x = make_input(n, 6, dt), dy = make_input(n, 7, dt);
      const Tensor y = ops::relu(x.t);
      // relu and its backward are exact: selects, no arithmetic.
      EXPECT_EQ(to_doubles(y), map_values(x.v, [](double v) { return v > 0 ? v : 0.0; }));
      EXPECT_EQ(
          to_doubles(ops::relu_backward(dy.t, y)),
          map_values(dy.v, to_doubles(y), [](double g, double v) { return v > 0 ? g : 0.0; }));
    }
}

TEST(Elementwise, ReluEdgeValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::from_vector<float>({0.0f, -0.0f, -inf, inf, nan, -1e-30f}, {6});
  const auto y = ops::relu(x).to_vector<float>();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], inf);
  EXPECT_TRUE(std::isnan(y[4])) << "relu must propagate NaN so divergence is visible";
  EXPECT_EQ(y[5], 0.0f);
  // The gradient at y == 0 is 0 (PyTorch's convention).
  const Tensor dy = Tensor::full({6}, 2.0);
  const auto g = ops::relu_backward(dy, ops::relu(x)).to_vector<float>();
  EXPECT_EQ(g, (std::vector<float>{0, 0, 0, 2, 0, 0}));
}

TEST(Elementwise, NonContiguousAndMultiDimInputs) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::from_vector<float>({10, 20, 30, 40, 50, 60}, {3, 2}).permute({1, 0});
  // b is [[10,30,50],[20,40,60]] as a view.
  const Tensor s = ops::add(a, b);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{11, 32, 53, 24, 45, 66}));
}

TEST(Elementwise, RejectsF16OnCpu) {
  const Tensor a = Tensor::zeros({4}, DType::F16);
  try {
    ops::relu(a);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.message().find("relu"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("f16"), std::string::npos) << e.message();
  }
}

TEST(Elementwise, ShapeMismatchIsAnError) {
  EXPECT_THROW(ops::add(Tensor::zeros({3}), Tensor::zeros({4})), Error);
  EXPECT_THROW(ops::mul(Tensor::zeros({3}), Tensor::zeros({3}, DType::F64)), Error);
}

}  // namespace
}  // namespace hg
