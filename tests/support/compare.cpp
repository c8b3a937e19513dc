#include "support/compare.h"

#include <cmath>
#include <limits>

#include "hourglass/base/rng.h"

namespace hg::test {

Tolerance tolerance_for(DType dtype, int64_t reduction_length) {
  double eps = 0;
  switch (dtype) {
    case DType::F64: eps = std::numeric_limits<double>::epsilon(); break;
    case DType::F32: eps = std::numeric_limits<float>::epsilon(); break;
    case DType::BF16: eps = 1.0 / 128; break;
    case DType::F16: eps = 1.0 / 1024; break;
    default: eps = 0; break;
  }
  const double growth = 4.0 * std::sqrt(double(std::max<int64_t>(reduction_length, 1)));
  Tolerance tol{growth * eps, growth * eps};
  if (dtype == DType::BF16 || dtype == DType::F16) tol.max_mean_error = eps;
  return tol;
}

std::vector<double> to_doubles(const Tensor& t) { return t.contiguous().to_vector<double>(); }

::testing::AssertionResult all_close(const std::vector<double>& got, const std::vector<double>& ref,
                                     const Tolerance& tol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure()
           << "size mismatch: got " << got.size() << " values, reference has " << ref.size();
  double mean_err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]))
      return ::testing::AssertionFailure() << "non-finite value " << got[i] << " at " << i;
    if (!std::isfinite(ref[i]))
      return ::testing::AssertionFailure() << "non-finite reference " << ref[i] << " at " << i;
    const double err = std::abs(got[i] - ref[i]);
    if (err > tol.atol + tol.rtol * std::abs(ref[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", reference " << ref[i] << ", error "
             << err << " > " << tol.atol << " + " << tol.rtol << " * |ref|";
    mean_err += got[i] - ref[i];
  }
  // The bias check is statistical: unbiased rounding averages out only over many elements (a
  // single element's rounding error is as large as it is), so it needs a sample.
  constexpr size_t kBiasSample = 64;
  if (tol.max_mean_error >= 0 && got.size() >= kBiasSample) {
    mean_err /= double(got.size());
    if (std::abs(mean_err) > tol.max_mean_error)
      return ::testing::AssertionFailure()
             << "mean signed error " << mean_err << " exceeds " << tol.max_mean_error;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const Tensor& got, const std::vector<double>& ref,
                                     const Tolerance& tol) {
  return all_close(to_doubles(got), ref, tol);
}

std::vector<double> random_values(int64_t n, uint64_t seed, double lo, double hi) {
  RandomStream rng(seed, 0x7e57);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = lo + (hi - lo) * double(rng.uniform());
  return v;
}

std::vector<double> round_f32(std::vector<double> values) {
  for (auto& v : values) v = double(float(v));
  return values;
}

Tensor f32_tensor(const std::vector<double>& values, const Shape& shape) {
  std::vector<float> f(values.begin(), values.end());
  return Tensor::from_vector(f, shape);
}

}  // namespace hg::test
