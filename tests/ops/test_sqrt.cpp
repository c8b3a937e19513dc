// sqrt and its backward: the CPU (f32, f64) against float64 references, fn::sqrt's gradient
// against finite differences, and the GPU (f32, bf16, f16) against the CPU on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hourglass/autograd/functions.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
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

// Empty, one element, odd, and larger than the CPU's parallel grain (several threads).
const int64_t kCpuSizes[] = {0, 1, 7, 1000, 100003};

// A tensor of `dtype` holding uniform values in [lo, hi), and the values it actually holds.
struct Input {
  Tensor t;
  Vec v;
};
Input make_input(int64_t n, uint64_t seed, double lo, double hi, DType dtype) {
  const Tensor t = Tensor::from_vector(random_values(n, seed, lo, hi), {n}).to(dtype);
  return {t, to_doubles(t)};
}

TEST(Sqrt, MatchesReferenceOnCpu) {
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t n : kCpuSizes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Input x = make_input(n, 1, 0.0, 9.0, dt);
      const Tensor y = ops::sqrt(x.t);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(y.shape(), x.t.shape());
      Vec ref(x.v.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::sqrt(x.v[i]);
      // One correctly rounded operation per element.
      EXPECT_TRUE(all_close(y, ref, test::tolerance_for(dt, 1)));
    }
}

TEST(Sqrt, BackwardMatchesReferenceOnCpu) {
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t n : kCpuSizes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Input dy = make_input(n, 2, -2.0, 2.0, dt);
      const Input y = make_input(n, 3, 0.25, 3.0, dt);
      Vec ref(y.v.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = dy.v[i] * 0.5 / y.v[i];
      // 2 y is exact, the division rounds once.
      EXPECT_TRUE(all_close(ops::sqrt_backward(dy.t, y.t), ref, test::tolerance_for(dt, 1)));
    }
}

TEST(Sqrt, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const auto y = ops::sqrt(Tensor::from_vector<float>({0.0f, -0.0f, 4.0f, inf, -1.0f}, {5}))
                     .to_vector<float>();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_EQ(y[3], inf);
  EXPECT_TRUE(std::isnan(y[4])) << "sqrt of a negative value must be NaN, as std::sqrt";
  // The gradient at y == 0 is infinite (PyTorch's too).
  const auto g = ops::sqrt_backward(Tensor::full({1}, 1.0), Tensor::zeros({1})).item();
  EXPECT_EQ(g, double(inf));
}

TEST(Sqrt, GradientMatchesFiniteDifferences) {
  // f(x) = sum(sqrt(x) * c) in f64: df/dx_i = c_i / (2 sqrt(x_i)).
  const Vec xs = random_values(6, 4, 0.5, 4.0), cs = random_values(6, 5, -1.0, 1.0);
  Tensor x = Tensor::from_vector(xs, {6});
  x.set_requires_grad(true);
  const Tensor c = Tensor::from_vector(cs, {6});
  autograd::backward(fn::sum(fn::mul(fn::sqrt(x), c)));
  const Vec numeric = test::ref::numeric_gradient(
      [&](const Vec& v) {
        double f = 0;
        for (size_t i = 0; i < v.size(); ++i) f += std::sqrt(v[i]) * cs[i];
        return f;
      },
      xs);
  // Central differences with h = 1e-6 on values of order 1: error ~1e-9.
  EXPECT_TRUE(all_close(x.grad(), numeric, {1e-6, 1e-7}));
}

TEST(Sqrt, RejectsIntegerInput) {
  EXPECT_THROW(ops::sqrt(Tensor::zeros({3}, DType::I32)), Error);
  EXPECT_THROW(ops::sqrt_backward(Tensor::zeros({3}), Tensor::zeros({4})), Error);
}

// ---- the GPU against the CPU

const DType kGpuDtypes[] = {DType::F32, DType::BF16, DType::F16};
// One element, below one pack, one pack plus one, odd, ~1e6.
const int64_t kGpuSizes[] = {1, 3, 9, 1001, (int64_t(1) << 20) + 3};

// f32: both sides round sqrt and the division correctly, so they agree to an ulp or two. bf16 /
// f16: the GPU rounds its float result once to the dtype (2^-9 relative for bf16), the CPU
// keeps f32: 1e-2 of the output's scale covers it, and the mean signed error of unbiased
// rounding stays far below that.
test::Tolerance gpu_tol(DType dtype, double scale) {
  if (dtype == DType::F32) return {1e-6, 1e-7 * scale};
  return {1e-2, 1e-2 * scale, 1e-3 * scale};
}

// The values of `values` rounded to dtype: on the GPU in dtype and on the CPU in f32.
struct Pair {
  Tensor gpu, cpu;
};
Pair on_both(const Vec& values, DType dtype, int64_t offset = 0) {
  const int64_t n = int64_t(values.size());
  const Tensor rounded = test::f32_tensor(values, {n}).to(dtype);
  Pair p{rounded.to(Device::gpu(0)), rounded.to(DType::F32)};
  if (offset > 0) {  // a view one element in: contiguous but not 16-byte aligned
    p.gpu = p.gpu.narrow(0, offset, n - offset);
    p.cpu = p.cpu.narrow(0, offset, n - offset);
  }
  return p;
}

TEST(GpuSqrt, MatchesCpuOverDtypesSizesAndAlignment) {
  HG_REQUIRE_GPU();
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);  // an element the kernel does not write stays NaN and fails
#endif
  for (DType dtype : kGpuDtypes)
    for (int64_t n : kGpuSizes)
      for (int64_t offset : {0, 1}) {
        if (n - offset < 1) continue;
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " n=" << n << " offset=" << offset);
        const Pair x = on_both(random_values(n, 6, 0.0, 4.0), dtype, offset);
        const Pair dy = on_both(random_values(n, 7, -2.0, 2.0), dtype, offset);
        const Pair y = on_both(random_values(n, 8, 0.25, 2.0), dtype, offset);
        const Tensor got = ops::sqrt(x.gpu);
        ASSERT_EQ(got.device(), Device::gpu(0));
        ASSERT_EQ(got.dtype(), dtype);
        EXPECT_TRUE(all_close(got, to_doubles(ops::sqrt(x.cpu)), gpu_tol(dtype, 2))) << "sqrt";
        // |dy / (2 y)| <= 4.
        EXPECT_TRUE(all_close(ops::sqrt_backward(dy.gpu, y.gpu),
                              to_doubles(ops::sqrt_backward(dy.cpu, y.cpu)), gpu_tol(dtype, 4)))
            << "sqrt_backward";
      }
}

}  // namespace
}  // namespace hg
