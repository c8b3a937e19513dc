#include "hourglass/nn/init.h"

#include <cmath>
#include <vector>

namespace hg::nn {

namespace {
void fill_from(Tensor& t, const std::vector<float>& values) {
  t.copy_(Tensor::from_vector(values, t.shape()));
}
}  // namespace

void kaiming_normal_(Tensor& t, int64_t fan, double gain, RandomStream& rng) {
  HG_ASSERT(fan > 0, "kaiming init with fan {}", fan);
  const double std = gain / std::sqrt(double(fan));
  std::vector<float> v(size_t(t.numel()));
  for (auto& x : v) x = float(std * rng.normal());
  fill_from(t, v);
}

void uniform_(Tensor& t, double bound, RandomStream& rng) {
  std::vector<float> v(size_t(t.numel()));
  for (auto& x : v) x = float(bound * (2.0 * rng.uniform() - 1.0));
  fill_from(t, v);
}

}  // namespace hg::nn
