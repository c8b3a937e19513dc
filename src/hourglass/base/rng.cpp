#include "hourglass/base/rng.h"

#include <cmath>

namespace hg {

float RandomStream::normal() {
  // Box-Muller on (0, 1]: 1 - u avoids log(0).
  const float u1 = 1.0f - uniform();
  const float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
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

}  // namespace hg
