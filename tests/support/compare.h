// Comparisons for op tests. Every comparison first requires finite values (a NaN or inf never
// passes), then |got - ref| <= atol + rtol * |ref| elementwise, and for low-precision dtypes a
// bound on the mean signed error (bias).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hourglass/tensor/tensor.h"

namespace hg::test {

struct Tolerance {
  double rtol;
  double atol;
  double max_mean_error = -1;  // < 0: no bias check
};

// Tolerance for a result of dtype `dtype` produced by sums of `reduction_length` terms:
// rounding error grows about like sqrt(length) * eps for random-sign terms; we allow
// 4 * sqrt(length) * eps relative plus the same absolute (values are O(1)).
Tolerance tolerance_for(DType dtype, int64_t reduction_length);

// Compares `got` (any device/dtype) with a float64 reference of the same number of elements.
::testing::AssertionResult all_close(const Tensor& got, const std::vector<double>& ref,
                                     const Tolerance& tol);
::testing::AssertionResult all_close(const std::vector<double>& got, const std::vector<double>& ref,
                                     const Tolerance& tol);

// Values of a tensor as doubles (copied to the CPU).
std::vector<double> to_doubles(const Tensor& t);

// Uniform random values in [lo, hi) from a seeded Philox stream.
std::vector<double> random_values(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);
// A CPU f32 tensor holding `values` (rounded to f32), shape `shape`.
Tensor f32_tensor(const std::vector<double>& values, const Shape& shape);
// Rounds values to f32 precision, so references see exactly the kernel's inputs.
std::vector<double> round_f32(std::vector<double> values);

}  // namespace hg::test
