// Dropout on the CPU: the mask is the documented function of (seed, offset + i), its keep rate
// is within statistical bounds, kept values are scaled by 1/(1-p), and backward matches.
#include <gtest/gtest.h>

#include <cmath>

#include "hourglass/base/parallel.h"
#include "hourglass/base/rng.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;
using test::tolerance_for;

// The documented rule, written out independently of the kernel.
bool reference_keep(uint64_t seed, uint64_t index, double p) {
  const Philox::Block block = Philox(seed)(index / 4, 0);
  return double(uniform_from_bits(block[index % 4])) >= p;
}

TEST(Dropout, ZeroProbabilityIsIdentity) {
  const Tensor x = test::f32_tensor(random_values(1001, 1), {7, 11, 13});
  const auto out = ops::dropout(x, 0.0, 42, 0);
  EXPECT_EQ(out.y.shape(), x.shape());
  EXPECT_EQ(out.y.to_vector<float>(), x.to_vector<float>());
  EXPECT_FALSE(out.y.same_storage(x)) << "y must be a copy";
  EXPECT_EQ(out.mask.dtype(), DType::U8);
  for (uint8_t m : out.mask.to_vector<uint8_t>()) ASSERT_EQ(m, 1);
  EXPECT_EQ(ops::dropout_backward(x, out.mask, 0.0).to_vector<float>(), x.to_vector<float>());
}

TEST(Dropout, MaskFollowsPhiloxRule) {
  for (uint64_t offset : {uint64_t(0), uint64_t(1), uint64_t(6), uint64_t(1) << 40}) {
    const int64_t n = 50001;  // odd, spans several parallel chunks
    const auto out = ops::dropout(Tensor::full({n}, 1.0), 0.3, 1234, offset);
    const auto mask = out.mask.to_vector<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(mask[size_t(i)], reference_keep(1234, offset + uint64_t(i), 0.3))
          << "offset " << offset << " element " << i;
  }
}

TEST(Dropout, KeepRateWithinStatisticalBounds) {
  const int64_t n = 1 << 20;
  for (double p : {0.1, 0.5, 0.9}) {
    const auto out = ops::dropout(Tensor::full({n}, 1.0), p, 7, 0);
    int64_t kept = 0;
    for (uint8_t m : out.mask.to_vector<uint8_t>()) kept += m;
    // Binomial(n, 1-p): 6 standard deviations, a false alarm about once in 5e8 runs.
    const double sigma = std::sqrt(double(n) * p * (1 - p));
    EXPECT_NEAR(double(kept), double(n) * (1 - p), 6 * sigma) << "p=" << p;
    // Kept values are 1/(1-p), so the mean of y estimates the mean of x (1).
    EXPECT_NEAR(ops::mean(out.y).item(), 1.0, 6 * sigma / double(n) / (1 - p)) << "p=" << p;
  }
}

TEST(Dropout, DeterministicGivenSeedAndOffset) {
  const Tensor x = test::f32_tensor(random_values(10000, 2), {100, 100});
  const auto a = ops::dropout(x, 0.5, 99, 12345);
  const auto b = ops::dropout(x, 0.5, 99, 12345);
  EXPECT_EQ(a.mask.to_vector<uint8_t>(), b.mask.to_vector<uint8_t>());
  EXPECT_EQ(a.y.to_vector<float>(), b.y.to_vector<float>());
  const auto other_seed = ops::dropout(x, 0.5, 100, 12345);
  const auto other_offset = ops::dropout(x, 0.5, 99, 12346);
  EXPECT_NE(a.mask.to_vector<uint8_t>(), other_seed.mask.to_vector<uint8_t>());
  EXPECT_NE(a.mask.to_vector<uint8_t>(), other_offset.mask.to_vector<uint8_t>());
}

TEST(Dropout, OffsetShiftsTheStream) {
  // Element i at offset k has the fate of element i + k at offset 0, for any alignment of k.
  const int64_t n = 4099;
  const auto whole = ops::dropout(Tensor::full({n}, 1.0), 0.4, 5, 0).mask.to_vector<uint8_t>();
  for (int64_t k : {1, 2, 3, 4, 7, 1000}) {
    const auto tail =
        ops::dropout(Tensor::full({n - k}, 1.0), 0.4, 5, uint64_t(k)).mask.to_vector<uint8_t>();
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), whole.begin() + k)) << "offset " << k;
  }
}

TEST(Dropout, SameMaskOnAnyThreadCount) {
  const int64_t n = 200003;
  const Tensor x = Tensor::full({n}, 1.0);
  const int saved = num_threads();
  set_num_threads(1);
  const auto one = ops::dropout(x, 0.25, 3, 17).mask.to_vector<uint8_t>();
  set_num_threads(3);
  const auto three = ops::dropout(x, 0.25, 3, 17).mask.to_vector<uint8_t>();
  set_num_threads(saved);
  EXPECT_EQ(one, three);
}

TEST(Dropout, ScalesKeptValuesAndBackwardMatches) {
  const double p = 0.3;
  const int64_t n = 3001;
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = Tensor::from_vector(random_values(n, 3, -2, 2), {n}).to(dt);
    const Tensor dy = Tensor::from_vector(random_values(n, 4, -2, 2), {n}).to(dt);
    const auto out = ops::dropout(x, p, 11, 0);
    EXPECT_EQ(out.y.dtype(), dt);
    const auto xv = to_doubles(x), dyv = to_doubles(dy);
    const auto mask = out.mask.to_vector<uint8_t>();
    std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      y_ref[size_t(i)] = mask[size_t(i)] ? xv[size_t(i)] / (1 - p) : 0.0;
      dx_ref[size_t(i)] = mask[size_t(i)] ? dyv[size_t(i)] / (1 - p) : 0.0;
    }
    // x * (mask * scale): the scale's rounding plus one product.
    EXPECT_TRUE(all_close(out.y, y_ref, tolerance_for(dt, 2)));
    EXPECT_TRUE(all_close(ops::dropout_backward(dy, out.mask, p), dx_ref, tolerance_for(dt, 2)));
    // Dropped elements are exactly zero.
    const auto y = to_doubles(out.y);
    for (int64_t i = 0; i < n; ++i)
      if (!mask[size_t(i)]) ASSERT_EQ(y[size_t(i)], 0.0);
  }
}

TEST(Dropout, BadArgumentsAreErrors) {
  const Tensor x = Tensor::zeros({4});
  EXPECT_THROW(ops::dropout(x, 1.0, 0, 0), Error);
  EXPECT_THROW(ops::dropout(x, -0.1, 0, 0), Error);
  const auto out = ops::dropout(x, 0.5, 0, 0);
  EXPECT_THROW(ops::dropout_backward(x, out.mask.to(DType::F32), 0.5), Error);
}

}  // namespace
}  // namespace hg
