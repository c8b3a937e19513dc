// The ops a policy network's loss is made of: tanh and its backward, exp, log_softmax and its
// backward, gather_columns and its backward; scale_rows (stochastic depth's per-sample factor,
// its own gradient). The CPU (f32, f64) against float64 references,
// the autograd functions against finite differences, edge values (large scores, indices out of
// range), and the GPU (f32, bf16, f16) against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hourglass/autograd/functions.h"
#include "hourglass/base/rng.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#include "support/reference_dense.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#endif

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;
using Vec = std::vector<double>;

Tensor tensor_of(const Vec& v, const Shape& shape, DType dtype) {
  return Tensor::from_vector(v, shape).to(dtype);
}

Tensor index_of(const std::vector<int64_t>& v) {
  return Tensor::from_vector(v, {int64_t(v.size())});
}

std::vector<int64_t> random_index(int64_t rows, int64_t columns, uint64_t seed) {
  RandomStream rng(seed, 0);
  std::vector<int64_t> idx(static_cast<size_t>(rows));
  for (auto& i : idx) i = int64_t(rng.below(uint64_t(columns)));
  return idx;
}

// Rows x columns shapes: one row, odd sizes, many rows of few columns (a policy's batch),
// a wide row (several warps' worth on a GPU), and more rows than one thread takes.
const std::pair<int64_t, int64_t> kShapes[] = {{1, 1},   {1, 5},    {7, 3},
                                               {300, 2}, {3, 1000}, {5000, 6}};

TEST(Tanh, MatchesReferenceOnCpu) {
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t n : {0, 1, 7, 1000, 100003}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Tensor x = tensor_of(random_values(n, 1, -5.0, 5.0), {n}, dt);
      const Vec xv = to_doubles(x);
      Vec ref(xv.size()), ref_exp(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) {
        ref[i] = std::tanh(xv[i]);
        ref_exp[i] = std::exp(xv[i]);
      }
      EXPECT_TRUE(all_close(ops::tanh(x), ref, test::tolerance_for(dt, 2)));
      EXPECT_TRUE(all_close(ops::exp(x), ref_exp, test::tolerance_for(dt, 2)));
      const Tensor dy = tensor_of(random_values(n, 2, -2.0, 2.0), {n}, dt);
      const Tensor y = tensor_of(random_values(n, 3, -1.0, 1.0), {n}, dt);
      const Vec dyv = to_doubles(dy), yv = to_doubles(y);
      Vec ref_back(yv.size());
      for (size_t i = 0; i < yv.size(); ++i) ref_back[i] = dyv[i] * (1 - yv[i] * yv[i]);
      // Three roundings (y^2, 1 - y^2, the product).
      EXPECT_TRUE(all_close(ops::tanh_backward(dy, y), ref_back, test::tolerance_for(dt, 3)));
    }
}

TEST(Tanh, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const auto t =
      ops::tanh(Tensor::from_vector<float>({0.0f, 30.0f, -30.0f, inf}, {4})).to_vector<float>();
  EXPECT_EQ(t[0], 0.0f);
  EXPECT_EQ(t[1], 1.0f);
  EXPECT_EQ(t[2], -1.0f);
  EXPECT_EQ(t[3], 1.0f);
  EXPECT_TRUE(std::isnan(ops::tanh(Tensor::full({1}, NAN)).item())) << "NaN must stay NaN";
  // A dense sweep of f32 inputs (both branches of the CPU's formula, the cap at 10): within one
  // ulp of tanh in double.
  std::vector<float> xs;
  for (float v = -12.0f; v <= 12.0f; v += 0.00123f) xs.push_back(v);
  const auto got = ops::tanh(Tensor::from_vector(xs, {int64_t(xs.size())})).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double ref = std::tanh(double(xs[i]));
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(ref), 1e-30)) - 23);
    ASSERT_LE(std::fabs(double(got[i]) - ref), ulp) << "tanh(" << xs[i] << ")";
  }
  const auto e =
      ops::exp(Tensor::from_vector<float>({0.0f, -200.0f, 200.0f}, {3})).to_vector<float>();
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_EQ(e[2], inf);
}

// log_softmax per row in float64: x - max - log(sum exp(x - max)).
Vec ref_log_softmax(const Vec& x, int64_t rows, int64_t columns) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * columns;
    double mx = xr[0];
    for (int64_t j = 1; j < columns; ++j) mx = std::max(mx, xr[j]);
    double s = 0;
    for (int64_t j = 0; j < columns; ++j) s += std::exp(xr[j] - mx);
    for (int64_t j = 0; j < columns; ++j) y[size_t(r * columns + j)] = xr[j] - mx - std::log(s);
  }
  return y;
}

TEST(LogSoftmax, MatchesReferenceOnCpu) {
  for (DType dt : {DType::F32, DType::F64})
    for (const auto& [rows, columns] : kShapes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " " << rows << "x" << columns);
      const int64_t n = rows * columns;
      const Tensor x = tensor_of(random_values(n, 4, -6.0, 6.0), {rows, columns}, dt);
      const Tensor y = ops::log_softmax(x);
      ASSERT_EQ(y.shape(), x.shape());
      const Vec yref = ref_log_softmax(to_doubles(x), rows, columns);
      // A difference and a log of a sum over the row: a few roundings, scaled by |y| <= ~20.
      EXPECT_TRUE(all_close(y, yref, test::tolerance_for(dt, 4)));
      // Each row's probabilities sum to 1.
      const Vec yv = to_doubles(y);
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t j = 0; j < columns; ++j) s += std::exp(yv[size_t(r * columns + j)]);
        ASSERT_NEAR(s, 1.0, dt == DType::F32 ? 1e-5 : 1e-12);
      }
      const Tensor dy = tensor_of(random_values(n, 5, -1.0, 1.0), {rows, columns}, dt);
      const Vec dyv = to_doubles(dy);
      Vec dref(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t j = 0; j < columns; ++j) s += dyv[size_t(r * columns + j)];
        for (int64_t j = 0; j < columns; ++j) {
          const size_t k = size_t(r * columns + j);
          dref[k] = dyv[k] - std::exp(yv[k]) * s;
        }
      }
      EXPECT_TRUE(
          all_close(ops::log_softmax_backward(dy, y), dref, test::tolerance_for(dt, columns + 2)));
    }
}

TEST(LogSoftmax, LargeScoresStayFinite) {
  const Tensor x = Tensor::from_vector<float>({1000.0f, 999.0f, -1000.0f, 0.0f}, {2, 2});
  const auto y = ops::log_softmax(x).to_vector<float>();
  EXPECT_NEAR(y[0], -std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(y[1], -1.0 - std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(y[3], 0.0, 1e-6);
  EXPECT_NEAR(y[2], -1000.0, 1e-3);
}

TEST(GatherColumns, MatchesReferenceOnCpu) {
  for (DType dt : {DType::F32, DType::F64})
    for (const auto& [rows, columns] : kShapes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " " << rows << "x" << columns);
      const Tensor x = tensor_of(random_values(rows * columns, 6, -3.0, 3.0), {rows, columns}, dt);
      const std::vector<int64_t> idx = random_index(rows, columns, 7);
      const Vec xv = to_doubles(x);
      Vec ref(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) ref[size_t(r)] = xv[size_t(r * columns + idx[size_t(r)])];
      const Tensor got = ops::gather_columns(x, index_of(idx));
      ASSERT_EQ(got.shape(), Shape({rows}));
      EXPECT_TRUE(all_close(got, ref, {0.0, 0.0}));
      const Tensor dy = tensor_of(random_values(rows, 8, -1.0, 1.0), {rows}, dt);
      const Vec dyv = to_doubles(dy);
      Vec dref(static_cast<size_t>(rows * columns), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        dref[size_t(r * columns + idx[size_t(r)])] = dyv[size_t(r)];
      EXPECT_TRUE(
          all_close(ops::gather_columns_backward(dy, index_of(idx), columns), dref, {0.0, 0.0}));
    }
}

TEST(GatherColumns, IndexOutOfRangeIsRefusedByRow) {
  const Tensor x = Tensor::zeros({3, 2});
  try {
    ops::gather_columns(x, index_of({0, 1, 2}));
    ADD_FAILURE() << "index 2 of 2 columns accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 2 in row 2 is outside [0, 2)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::gather_columns_backward(Tensor::zeros({3}), index_of({0, -1, 0}), 2), Error);
  EXPECT_THROW(ops::gather_columns(x, Tensor::zeros({3}, DType::I32)), Error);
  EXPECT_THROW(ops::log_softmax(Tensor::zeros({3})), Error);
}

// The pieces of a policy-gradient loss through autograd: f(x) = sum_r c_r * log_softmax(W)
// [r, a_r] + sum tanh(x) * d + sum exp(x) * e, x [4,3], against central differences.
TEST(PolicyOps, GradientsMatchFiniteDifferences) {
  const int64_t rows = 4, columns = 3;
  const Vec xs = random_values(rows * columns, 9, -1.5, 1.5);
  const Vec cs = random_values(rows, 10, -1.0, 1.0), ds = random_values(rows * columns, 11, -1, 1),
            es = random_values(rows * columns, 12, -1, 1);
  const std::vector<int64_t> idx = {2, 0, 1, 2};
  Tensor x = Tensor::from_vector(xs, {rows, columns});
  x.set_requires_grad(true);
  const Tensor c = Tensor::from_vector(cs, {rows}), d = Tensor::from_vector(ds, {rows, columns}),
               e = Tensor::from_vector(es, {rows, columns});
  const Tensor picked = fn::gather_columns(fn::log_softmax(x), index_of(idx));
  const Tensor f = fn::add(fn::add(fn::sum(fn::mul(picked, c)), fn::sum(fn::mul(fn::tanh(x), d))),
                           fn::sum(fn::mul(fn::exp(x), e)));
  autograd::backward(f);
  const Vec numeric = test::ref::numeric_gradient(
      [&](const Vec& v) {
        const Vec y = ref_log_softmax(v, rows, columns);
        double total = 0;
        for (int64_t r = 0; r < rows; ++r)
          total += cs[size_t(r)] * y[size_t(r * columns + idx[size_t(r)])];
        for (size_t i = 0; i < v.size(); ++i)
          total += std::tanh(v[i]) * ds[i] + std::exp(v[i]) * es[i];
        return total;
      },
      xs);
  EXPECT_TRUE(all_close(x.grad(), numeric, {1e-6, 1e-7}));
}

// scale_rows: every element of row r times scale[r], for rows of any shape; in f64 exactly the
// float64 product, in f32 that product rounded once; its gradient the same op on dy.
TEST(ScaleRows, MatchesReferenceOnCpuAndIsItsOwnGradient) {
  const Vec xs = random_values(5 * 3 * 2 * 4, 30, -2.0, 2.0);
  const Vec ss = {0.0, 1.25, -0.5, 2.0, 1.0};
  const Tensor scale = test::f32_tensor(ss, {5});
  for (DType dtype : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = tensor_of(test::round_f32(xs), {5, 3, 2, 4}, dtype);
    Vec want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = double(float(xs[i])) * ss[i / 24];
    const Tensor y = ops::scale_rows(x, scale);
    ASSERT_EQ(y.shape(), x.shape());
    EXPECT_TRUE(all_close(y, dtype == DType::F32 ? test::round_f32(want) : want, {0.0, 0.0}));
  }
  Tensor x = Tensor::from_vector(xs, {5, 24});
  x.set_requires_grad(true);
  const Tensor d = Tensor::from_vector(random_values(5 * 24, 31), {5, 24});
  autograd::backward(fn::sum(fn::mul(fn::scale_rows(x, scale), d)));
  Vec want(xs.size());
  const Vec dv = to_doubles(d);
  for (size_t i = 0; i < xs.size(); ++i) want[i] = dv[i] * double(float(ss[i / 24]));
  EXPECT_TRUE(all_close(x.grad(), want, {1e-15, 0}));
  test::expect_invalid(
      [&] {
        ops::scale_rows(Tensor::zeros({5, 2}), Tensor::zeros({4}));
      },
      {"scale_rows", "[5]"});
  test::expect_invalid(
      [&] {
        ops::scale_rows(Tensor::zeros({5, 2}), Tensor::zeros({5}, DType::F64));
      },
      {"scale_rows", "scale"});
}

// ---- the GPU against the CPU

const DType kGpuDtypes[] = {DType::F32, DType::BF16, DType::F16};

// f32: tanhf / expf are within 2 ulp, the CPU's std:: within 1; the row sums are in float on
// the GPU and double on the CPU: 1e-5 relative covers both. bf16 / f16: the GPU rounds its
// float result once to the dtype (2^-9 relative for bf16), the CPU keeps f32: 1e-2 of the
// output's scale, and the mean signed error of unbiased rounding stays far below that.
test::Tolerance gpu_tol(DType dtype, double scale) {
  if (dtype == DType::F32) return {1e-5, 1e-6 * scale};
  return {1e-2, 1e-2 * scale, 2e-3 * scale};
}

// Values rounded to dtype, on the GPU in dtype and on the CPU in f32.
struct Pair {
  Tensor gpu, cpu;
};
Pair on_both(const Vec& values, const Shape& shape, DType dtype) {
  const Tensor rounded = test::f32_tensor(values, shape).to(dtype);
  return {rounded.to(Device::gpu(0)), rounded.to(DType::F32)};
}

TEST(GpuPolicyOps, TanhAndExpMatchCpu) {
  HG_REQUIRE_GPU();
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);  // an element the kernel does not write stays NaN and fails
#endif
  for (DType dtype : kGpuDtypes)
    for (int64_t n : {int64_t(1), int64_t(9), int64_t(1001), (int64_t(1) << 20) + 3}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " n=" << n);
      const Pair x = on_both(random_values(n, 13, -4.0, 4.0), {n}, dtype);
      const Pair dy = on_both(random_values(n, 14, -2.0, 2.0), {n}, dtype);
      const Pair y = on_both(random_values(n, 15, -1.0, 1.0), {n}, dtype);
      EXPECT_TRUE(all_close(ops::tanh(x.gpu), to_doubles(ops::tanh(x.cpu)), gpu_tol(dtype, 1)));
      EXPECT_TRUE(all_close(ops::exp(x.gpu), to_doubles(ops::exp(x.cpu)), gpu_tol(dtype, 55)));
      EXPECT_TRUE(all_close(ops::tanh_backward(dy.gpu, y.gpu),
                            to_doubles(ops::tanh_backward(dy.cpu, y.cpu)), gpu_tol(dtype, 2)));
    }
}

TEST(GpuPolicyOps, LogSoftmaxAndGatherMatchCpu) {
  HG_REQUIRE_GPU();
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);
#endif
  for (DType dtype : kGpuDtypes)
    for (const auto& [rows, columns] : kShapes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " " << rows << "x" << columns);
      const int64_t n = rows * columns;
      const Pair x = on_both(random_values(n, 16, -6.0, 6.0), {rows, columns}, dtype);
      const Tensor y_gpu = ops::log_softmax(x.gpu);
      const Tensor y_cpu = ops::log_softmax(x.cpu);
      // |y| up to ~2 * 6 + log(columns).
      EXPECT_TRUE(all_close(y_gpu, to_doubles(y_cpu), gpu_tol(dtype, 20))) << "log_softmax";
      // The backward from the same y on both sides (the GPU's, widened for the CPU).
      const Pair dy = on_both(random_values(n, 17, -1.0, 1.0), {rows, columns}, dtype);
      const Tensor y_same = y_gpu.to(Device::cpu()).to(DType::F32);
      EXPECT_TRUE(all_close(ops::log_softmax_backward(dy.gpu, y_gpu),
                            to_doubles(ops::log_softmax_backward(dy.cpu, y_same)),
                            gpu_tol(dtype, double(columns))))
          << "log_softmax_backward";
      const std::vector<int64_t> idx = random_index(rows, columns, 18);
      const Tensor index_cpu = index_of(idx), index_gpu = index_cpu.to(Device::gpu(0));
      EXPECT_TRUE(all_close(ops::gather_columns(x.gpu, index_gpu),
                            to_doubles(ops::gather_columns(x.cpu, index_cpu)), {0.0, 0.0}))
          << "gather_columns";
      const Pair g = on_both(random_values(rows, 19, -1.0, 1.0), {rows}, dtype);
      EXPECT_TRUE(all_close(ops::gather_columns_backward(g.gpu, index_gpu, columns),
                            to_doubles(ops::gather_columns_backward(g.cpu, index_cpu, columns)),
                            {0.0, 0.0}))
          << "gather_columns_backward";
    }
}

TEST(GpuPolicyOps, ScaleRowsMatchesCpu) {
  HG_REQUIRE_GPU();
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);
#endif
  for (DType dtype : kGpuDtypes)
    for (const auto& [rows, columns] : kShapes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " " << rows << "x" << columns);
      const Pair x = on_both(random_values(rows * columns, 32, -3.0, 3.0), {rows, columns}, dtype);
      const Tensor scale = test::f32_tensor(random_values(rows, 33, -2.0, 2.0), {rows});
      EXPECT_TRUE(all_close(ops::scale_rows(x.gpu, scale.to(Device::gpu(0))),
                            to_doubles(ops::scale_rows(x.cpu, scale)), gpu_tol(dtype, 6)));
    }
}

TEST(GpuPolicyOps, GatherIndexOutOfRangeGivesNaN) {
  HG_REQUIRE_GPU();
  const Tensor x = Tensor::zeros({2, 3}).to(Device::gpu(0));
  const Tensor index = index_of({1, 3}).to(Device::gpu(0));
  const auto out = ops::gather_columns(x, index).to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_TRUE(std::isnan(out[1]));
  const auto dx = ops::gather_columns_backward(Tensor::full({2}, 1.0).to(Device::gpu(0)), index, 3)
                      .to(Device::cpu())
                      .to_vector<float>();
  EXPECT_EQ(dx[1], 1.0f);
  EXPECT_TRUE(std::isnan(dx[3]));
}

}  // namespace
}  // namespace hg
