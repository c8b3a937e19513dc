#include "hourglass/nn/init.h"

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

}  // namespace hg::nn
