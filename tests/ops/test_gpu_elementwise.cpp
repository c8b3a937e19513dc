// The GPU backend's elementwise ops and full reductions against the CPU backend, in f32, bf16
// and f16 (inputs rounded to the dtype first, so the CPU reference sees exactly the GPU's
// inputs), over sizes that exercise the vector paths and their scalar tails: 1 element, odd
// sizes, sizes off a multiple of the pack width, ~1e6, and unaligned views. Outputs are
// allocated poisoned (NaN), so an element a kernel forgets to write fails the comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/gpu.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#endif

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;

const DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};
// One element, below one pack, odd, one pack plus one, larger than a block's share, ~1e6.
const int64_t kSizes[] = {1, 3, 7, 9, 1001, 4099, (int64_t(1) << 20) + 3};

Device gpu0() { return Device::gpu(0); }

// Every GPU block handed out from here on is NaN-filled until written.
void poison_outputs() {
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);
#endif
}

// The same values (rounded to dtype) on the GPU in dtype and on the CPU in f32.
struct Input {
  Tensor gpu, cpu;
};
Input make_input(const std::vector<double>& values, const Shape& shape, DType dtype) {
  const Tensor rounded = test::f32_tensor(values, shape).to(dtype);
  return {rounded.to(gpu0()), rounded.to(DType::F32)};
}

// f32: the same f32 operations up to contraction into an FMA, a few ulps. bf16/f16: the GPU
// rounds its float result to the dtype once (at most half an ulp, 2^-9 relative for bf16), the
// CPU keeps f32: 1e-2 of the output's scale covers both with margin, and the mean signed error
// (round to nearest even is unbiased) stays far below it.
test::Tolerance tol(DType dtype, double scale) {
  if (dtype == DType::F32) return {1e-5, 1e-6 * scale};
  return {1e-2, 1e-2 * scale, 1e-3 * scale};
}

std::string label(DType dtype, int64_t n) {
  return std::string(dtype_name(dtype)) + " n=" + std::to_string(n);
}

// Runs `op` on the GPU and on the CPU with the same (rounded) inputs and compares.
void expect_binary(const char* name, DType dtype, const Input& a, const Input& b, double scale,
                   const std::function<Tensor(const Tensor&, const Tensor&)>& op) {
  SCOPED_TRACE(name);
  const Tensor got = op(a.gpu, b.gpu);
  ASSERT_EQ(got.device(), gpu0());
  ASSERT_EQ(got.dtype(), dtype);
  ASSERT_EQ(got.shape(), a.gpu.shape());
  EXPECT_TRUE(all_close(got, to_doubles(op(a.cpu, b.cpu)), tol(dtype, scale)));
}

void check_all_ops(DType dtype, const Input& a, const Input& b) {
  // |a|, |b| <= 2: sums and differences up to 4, products up to 4.
  expect_binary("add", dtype, a, b, 4, [](auto& x, auto& y) { return ops::add(x, y); });
  expect_binary("sub", dtype, a, b, 4, [](auto& x, auto& y) { return ops::sub(x, y); });
  expect_binary("mul", dtype, a, b, 4, [](auto& x, auto& y) { return ops::mul(x, y); });
  expect_binary("add_scalar", dtype, a, b, 3,
                [](auto& x, auto&) { return ops::add_scalar(x, 0.3); });
  expect_binary("mul_scalar", dtype, a, b, 4,
                [](auto& x, auto&) { return ops::mul_scalar(x, -1.7); });
  expect_binary("relu", dtype, a, b, 2, [](auto& x, auto&) { return ops::relu(x); });
  // y = relu(b) has exact zeros, so both branches of the mask are taken.
  expect_binary("relu_backward", dtype, a, b, 2,
                [](auto& dy, auto& y) { return ops::relu_backward(dy, ops::relu(y)); });
  for (double alpha : {1.0, -0.25}) {
    SCOPED_TRACE(testing::Message() << "alpha=" << alpha);
    expect_binary("add_", dtype, a, b, 4, [alpha](auto& x, auto& y) {
      Tensor d = x.clone();
      ops::add_(d, y, alpha);
      return d;
    });
  }
  expect_binary("mul_scalar_", dtype, a, b, 2, [](auto& x, auto&) {
    Tensor d = x.clone();
    ops::mul_scalar_(d, 0.5);
    return d;
  });
}

// accumulate_ on the GPU: f32 destinations from f32, bf16 and f16 sources (the multi-tensor
// kernel, more pairs than one launch's table), bf16 destinations (one add_ each), with sizes
// below and across its chunks and an unaligned view, each bit for bit what add_ gives after
// converting the source (the sum rounds once in either). Destinations are poisoned clones: a
// pair the kernel skips keeps its old value and fails.
TEST(GpuElementwise, AccumulateIsAddOfEachConvertedSource) {
  HG_REQUIRE_GPU();
  poison_outputs();
  std::vector<Tensor> dsts, srcs, want;
  uint64_t seed = 70;
  for (int copy = 0; copy < 30; ++copy) {
    for (const DType src_dtype : kDtypes) {
      const int64_t n = kSizes[size_t(copy) % std::size(kSizes)];
      const DType dst_dtype = copy % 10 == 9 ? DType::BF16 : DType::F32;
      const Tensor d = make_input(random_values(n, seed++, -2.0, 2.0), {n}, dst_dtype).gpu;
      Tensor s = make_input(random_values(n + 1, seed++, -2.0, 2.0), {n + 1}, src_dtype).gpu;
      if (copy % 7 == 3)
        s = s.narrow(0, 1, n);  // an unaligned source view
      else
        s = s.narrow(0, 0, n);
      Tensor expected = d.clone();
      ops::add_(expected, s.to(dst_dtype));
      dsts.push_back(d.clone());
      srcs.push_back(s);
      want.push_back(expected);
    }
  }
  ops::accumulate_(dsts, srcs);
  for (size_t i = 0; i < dsts.size(); ++i) {
    const Tensor got = dsts[i].to(Device::cpu()), exp = want[i].to(Device::cpu());
    ASSERT_EQ(got.nbytes(), exp.nbytes());
    EXPECT_EQ(0, std::memcmp(got.data_ptr(), exp.data_ptr(), got.nbytes()))
        << "pair " << i << ": " << srcs[i].describe() << " into " << dsts[i].describe();
  }
}

TEST(GpuElementwise, MatchesCpuOverDtypesAndSizes) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (DType dtype : kDtypes)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(label(dtype, n));
      const Input a = make_input(random_values(n, 1, -2, 2), {n}, dtype);
      const Input b = make_input(random_values(n, 2, -2, 2), {n}, dtype);
      check_all_ops(dtype, a, b);
    }
}

TEST(GpuElementwise, UnalignedViewsTakeTheScalarPath) {
  HG_REQUIRE_GPU();
  poison_outputs();
  // A view starting one element into its storage is contiguous but not 16-byte aligned.
  for (DType dtype : kDtypes)
    for (int64_t n : {int64_t(1001), (int64_t(1) << 20) + 3}) {
      SCOPED_TRACE(label(dtype, n));
      const Input a0 = make_input(random_values(n + 1, 3, -2, 2), {n + 1}, dtype);
      const Input b0 = make_input(random_values(n + 1, 4, -2, 2), {n + 1}, dtype);
      const Input a{a0.gpu.narrow(0, 1, n), a0.cpu.narrow(0, 1, n)};
      const Input b{b0.gpu.narrow(0, 1, n), b0.cpu.narrow(0, 1, n)};
      check_all_ops(dtype, a, b);
    }
}

TEST(GpuElementwise, MultiDimensionalShapesKeepTheirShape) {
  HG_REQUIRE_GPU();
  poison_outputs();
  const Input a = make_input(random_values(2 * 7 * 5 * 3, 5, -2, 2), {2, 7, 5, 3}, DType::BF16);
  const Input b = make_input(random_values(2 * 7 * 5 * 3, 6, -2, 2), {2, 7, 5, 3}, DType::BF16);
  check_all_ops(DType::BF16, a, b);
}

TEST(GpuElementwise, ReluPassesNaN) {
  HG_REQUIRE_GPU();
  const Tensor x =
      Tensor::from_vector<float>({-1.0f, NAN, 2.0f, -0.0f, INFINITY, -INFINITY}, {6}).to(gpu0());
  const auto y = ops::relu(x).to_vector<float>();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_TRUE(std::isnan(y[1])) << "relu must let NaN through, as the CPU does";
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_EQ(y[4], INFINITY);
  EXPECT_EQ(y[5], 0.0f);
}

TEST(GpuElementwise, EmptyTensorsLaunchNothing) {
  HG_REQUIRE_GPU();
  for (DType dtype : kDtypes) {
    Tensor a = Tensor::empty({0, 3}, dtype, gpu0());
    const Tensor b = Tensor::empty({0, 3}, dtype, gpu0());
    EXPECT_EQ(ops::add(a, b).shape(), (Shape{0, 3}));
    EXPECT_EQ(ops::mul_scalar(a, 2.0).numel(), 0);
    EXPECT_EQ(ops::relu(a).numel(), 0);
    ops::add_(a, b, 0.5);
    ops::mul_scalar_(a, 3.0);
    EXPECT_EQ(ops::sum(a).item(), 0.0);
    EXPECT_EQ(ops::sum_squares(a).item(), 0.0);
  }
}

// ---- reductions

// The CPU adds in double; the GPU in float by a fixed tree. Relative 1e-5 of the result plus
// 1e-6 per term (|terms| <= 1) bounds the float rounding with a wide margin, including sums that
// cancel to near zero.
::testing::AssertionResult sum_close(double got, double ref, int64_t n) {
  if (!std::isfinite(got)) return ::testing::AssertionFailure() << "non-finite sum " << got;
  const double bound = 1e-5 * std::abs(ref) + 1e-6 * double(std::max<int64_t>(n, 1));
  if (std::abs(got - ref) > bound)
    return ::testing::AssertionFailure() << "got " << got << ", cpu " << ref << ", error "
                                         << std::abs(got - ref) << " > " << bound;
  return ::testing::AssertionSuccess();
}

TEST(GpuReduce, SumAndSumSquaresMatchCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  const int64_t sizes[] = {1, 3, 9, 1001, 32769, (int64_t(1) << 20) + 3, 5000011};
  for (DType dtype : kDtypes)
    for (int64_t n : sizes) {
      SCOPED_TRACE(label(dtype, n));
      // Mostly positive, so the sum grows like n and the relative bound is exercised too.
      const Input x = make_input(random_values(n, 7, -0.3, 1.0), {n}, dtype);
      const Tensor s = ops::sum(x.gpu), s2 = ops::sum_squares(x.gpu), m = ops::mean(x.gpu);
      for (const Tensor* t : {&s, &s2, &m}) {
        EXPECT_EQ(t->dtype(), DType::F32);
        EXPECT_EQ(t->numel(), 1);
        EXPECT_EQ(t->device(), gpu0());
      }
      EXPECT_TRUE(sum_close(s.item(), ops::sum(x.cpu).item(), n)) << "sum";
      EXPECT_TRUE(sum_close(s2.item(), ops::sum_squares(x.cpu).item(), n)) << "sum_squares";
      EXPECT_TRUE(sum_close(m.item() * double(n), ops::mean(x.cpu).item() * double(n), n))
          << "mean";
    }
}

// amax is exact on both sides (a maximum rounds nothing): the GPU's equals the CPU's, aligned or
// not, and a NaN anywhere gives NaN.
TEST(GpuReduce, AmaxEqualsCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (DType dtype : kDtypes)
    for (int64_t n : {int64_t(1), int64_t(9), int64_t(32769), int64_t(5000011)}) {
      SCOPED_TRACE(label(dtype, n));
      const Input x = make_input(random_values(n + 1, 9, -3.0, 2.0), {n + 1}, dtype);
      EXPECT_EQ(ops::amax(x.gpu).item(), ops::amax(x.cpu).item());
      EXPECT_EQ(ops::amax(x.gpu.narrow(0, 1, n)).item(), ops::amax(x.cpu.narrow(0, 1, n)).item());
      Tensor with_nan = x.cpu.clone();
      with_nan.narrow(0, n / 2, 1).fill_(std::nan(""));
      EXPECT_TRUE(std::isnan(ops::amax(with_nan.to(gpu0()).to(dtype)).item()));
    }
  EXPECT_EQ(ops::amax(Tensor::empty({0}, DType::F32, gpu0())).item(), 0.0);
}

TEST(GpuReduce, DeterministicAndIndependentOfAlignment) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t n = 3000017;
    const Input x0 = make_input(random_values(n + 1, 8, -1, 1), {n + 1}, dtype);
    const Tensor view = x0.gpu.narrow(0, 1, n);  // unaligned
    const Tensor copy = view.clone();            // the same values, aligned
    const double a = ops::sum_squares(view).item(), b = ops::sum_squares(view).item();
    EXPECT_EQ(a, b) << "two runs differ";
    EXPECT_EQ(ops::sum_squares(copy).item(), a) << "aligned and unaligned inputs differ";
    EXPECT_EQ(ops::sum(copy).item(), ops::sum(view).item());
  }
}

}  // namespace
}  // namespace hg
