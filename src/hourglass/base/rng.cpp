#include "hourglass/base/rng.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace hg {

float RandomStream::normal() {
  // Box-Muller on (0, 1]: 1 - u avoids log(0).
  const float u1 = 1.0f - uniform();
  const float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}

double sample_gamma(RandomStream& stream, double shape) {
  if (shape < 1.0)
    return sample_gamma(stream, shape + 1.0) * std::pow(stream.uniform_open(), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    // A standard normal by Box-Muller in double.
    const double x = std::sqrt(-2.0 * std::log(stream.uniform_open())) *
                     std::cos(6.283185307179586 * stream.uniform_open());
    const double t = 1.0 + c * x;
    if (t <= 0.0) continue;
    const double v = t * t * t, u = stream.uniform_open();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

double sample_beta(RandomStream& stream, double a, double b) {
  const double ga = sample_gamma(stream, a), gb = sample_gamma(stream, b);
  return ga + gb > 0.0 ? ga / (ga + gb) : 0.5;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t mix_stream(uint64_t a, uint64_t b, uint64_t c) {
  return splitmix64(splitmix64(splitmix64(a) ^ b) ^ c);
}

std::vector<int64_t> random_permutation(int64_t n, RandomStream& stream) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t(0));
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[size_t(i)], order[size_t(stream.below(uint64_t(i + 1)))]);
  return order;
}

}  // namespace hg
