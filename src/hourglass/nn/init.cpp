#include "hourglass/nn/init.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "hourglass/base/parallel.h"

namespace hg::nn {

namespace {
void fill_from(Tensor& t, const std::vector<float>& values) {
  t.copy_(Tensor::from_vector(values, t.shape()));
}

// v[i] = draw(stream) for the i-th value of `rng`'s sequential run, `draws` 32-bit draws per
// value, computed in chunks on the thread pool: each chunk seeks a copy of the stream to its
// first value, so the values are the sequential loop's, for any thread count. `rng` is left
// after the last value's draws (from wherever it stood).
template <typename Draw>
void fill_in_chunks(std::vector<float>& v, RandomStream& rng, uint64_t draws, Draw draw) {
  constexpr int64_t kGrain = 16384;
  const RandomStream start = rng;
  const uint64_t first = rng.position();
  parallel_for(int64_t(v.size()), kGrain, [&](int64_t begin, int64_t end) {
    RandomStream r = start;
    r.seek(first + uint64_t(begin) * draws);
    for (int64_t i = begin; i < end; ++i) v[size_t(i)] = draw(r);
  });
  rng.seek(first + uint64_t(v.size()) * draws);
}

}  // namespace

void kaiming_normal_(Tensor& t, int64_t fan, double gain, RandomStream& rng) {
  HG_ASSERT(fan > 0, "kaiming init with fan {}", fan);
  const double std = gain / std::sqrt(double(fan));
  std::vector<float> v(size_t(t.numel()));
  fill_in_chunks(v, rng, 2, [std](RandomStream& r) { return float(std * r.normal()); });
  fill_from(t, v);
}

void uniform_(Tensor& t, double bound, RandomStream& rng) {
  std::vector<float> v(size_t(t.numel()));
  fill_in_chunks(v, rng, 1,
                 [bound](RandomStream& r) { return float(bound * (2.0 * r.uniform() - 1.0)); });
  fill_from(t, v);
}

void orthogonal_(Tensor& t, double gain, RandomStream& rng) {
  HG_ASSERT(t.dim() >= 2 && t.numel() > 0, "orthogonal init of {}", t.describe());
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  // a: m x n, m >= n, column-major in `a` (column k at a[k * m]).
  const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  std::vector<double> a(size_t(m * n));
  for (double& v : a) v = double(rng.normal());
  // Modified Gram-Schmidt: each column made orthogonal to the ones before it, then normalised
  // (R's diagonal, the norms, is positive: the sign-corrected QR's Q).
  for (int64_t k = 0; k < n; ++k) {
    double* qk = a.data() + k * m;
    for (int64_t j = 0; j < k; ++j) {
      const double* qj = a.data() + j * m;
      double dot = 0;
      for (int64_t i = 0; i < m; ++i) dot += qj[i] * qk[i];
      for (int64_t i = 0; i < m; ++i) qk[i] -= dot * qj[i];
    }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i) norm += qk[i] * qk[i];
    norm = std::sqrt(norm);
    HG_ASSERT(norm > 0, "orthogonal init: a degenerate normal draw");
    for (int64_t i = 0; i < m; ++i) qk[i] /= norm;
  }
  // Q is m x n; the weight is rows x cols: Q itself when rows >= cols, else its transpose.
  std::vector<float> v(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double q = rows >= cols ? a[size_t(c * m + r)] : a[size_t(r * m + c)];
      v[size_t(r * cols + c)] = float(gain * q);
    }
  fill_from(t, v);
}

}  // namespace hg::nn
