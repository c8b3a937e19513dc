// sum / mean / sum_squares / amax on the CPU: accuracy against a float64 reference, and
// bit-for-bit determinism across thread counts.
#include <gtest/gtest.h>

#include <cmath>

#include "hourglass/base/parallel.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;
using test::tolerance_for;

// Around the kernel's 8192-element block and 8-lane boundaries, and several blocks.
const int64_t kSizes[] = {1, 7, 8, 9, 8191, 8192, 8193, (1 << 20) + 3};

struct RefSums {
  double sum = 0, squares = 0;
};
RefSums reference(const std::vector<double>& v) {
  RefSums r;
  for (double x : v) {
    r.sum += x;
    r.squares += x * x;
  }
  return r;
}

// The kernels accumulate in double and round to f32 once, so the only error that matters is
// that final rounding: a "reduction" of length 1, whatever the input length.
const test::Tolerance kTol = tolerance_for(DType::F32, 1);

TEST(Reduce, MatchesFloat64Reference) {
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Tensor x = Tensor::from_vector(random_values(n, uint64_t(n), -1.0, 1.5), {n}).to(dt);
      const RefSums r = reference(to_doubles(x));
      const Tensor s = ops::sum(x);
      EXPECT_EQ(s.dtype(), DType::F32);
      EXPECT_EQ(s.numel(), 1);
      EXPECT_TRUE(all_close(s, {r.sum}, kTol));
      EXPECT_TRUE(all_close(ops::sum_squares(x), {r.squares}, kTol));
      // mean = sum (rounded to f32) * (1/n): two more roundings.
      EXPECT_TRUE(all_close(ops::mean(x), {r.sum / double(n)}, tolerance_for(DType::F32, 3)));
    }
}

// The largest |x|: exact (a maximum rounds nothing), NaN when any element is, 0 when empty.
TEST(Reduce, AmaxIsTheLargestMagnitude) {
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dt) << " n=" << n);
      const Tensor x =
          Tensor::from_vector(random_values(n, uint64_t(n) + 5, -2.0, 1.5), {n}).to(dt);
      double expected = 0;
      for (double v : to_doubles(x)) expected = std::max(expected, std::abs(v));
      EXPECT_EQ(ops::amax(x).item(), double(float(expected)));
      Tensor with_nan = x.clone();
      with_nan.narrow(0, n - 1, 1).fill_(std::nan(""));
      EXPECT_TRUE(std::isnan(ops::amax(with_nan).item()));
    }
  EXPECT_EQ(ops::amax(Tensor::zeros({0})).item(), 0.0);
  EXPECT_EQ(ops::amax(Tensor::from_vector(std::vector<float>{-7.5f, 3.0f}, {2})).item(), 7.5);
}

TEST(Reduce, MultiDimAndNonContiguous) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).permute({1, 0});
  EXPECT_EQ(ops::sum(x).item(), 21.0);
  EXPECT_EQ(ops::sum_squares(x).item(), 91.0);
  EXPECT_EQ(ops::mean(x).item(), 3.5);
}

TEST(Reduce, EmptySumIsZero) {
  EXPECT_EQ(ops::sum(Tensor::zeros({0})).item(), 0.0);
  EXPECT_EQ(ops::sum_squares(Tensor::zeros({3, 0})).item(), 0.0);
  EXPECT_THROW(ops::mean(Tensor::zeros({0})), Error);
}

TEST(Reduce, AccumulatesInDouble) {
  // 2^24 + many ones: an f32 running sum would stall at 2^24 (16777216 + 1 == 16777216 in f32).
  const int64_t n = 1 << 16;
  std::vector<float> v(size_t(n), 1.0f);
  v[0] = 16777216.0f;
  const Tensor x = Tensor::from_vector(v, {n});
  EXPECT_EQ(ops::sum(x).item(), double(float(16777216.0 + double(n - 1))));
}

TEST(Reduce, BitIdenticalAcrossThreadCounts) {
  const int64_t n = (1 << 20) + 12345;
  const Tensor x = Tensor::from_vector(random_values(n, 99), {n}).to(DType::F32);
  const int saved = num_threads();
  std::vector<float> sums, squares;
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    sums.push_back(float(ops::sum(x).item()));
    squares.push_back(float(ops::sum_squares(x).item()));
  }
  set_num_threads(saved);
  for (size_t i = 1; i < sums.size(); ++i) {
    EXPECT_EQ(sums[i], sums[0]) << "thread setting " << i;
    EXPECT_EQ(squares[i], squares[0]) << "thread setting " << i;
  }
}

TEST(Reduce, RejectsHalfTypesOnCpu) {
  EXPECT_THROW(ops::sum(Tensor::zeros({4}, DType::F16)), Error);
}

}  // namespace
}  // namespace hg
