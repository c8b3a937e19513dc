// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011). A random value is a pure
// function of (seed, counter), so any sample's randomness can be recomputed from its
// coordinates (epoch, step, sample index) without replaying a stream: resuming needs no state.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace hg {

class Philox {
 public:
  using Block = std::array<uint32_t, 4>;

  explicit Philox(uint64_t seed) : key_{uint32_t(seed), uint32_t(seed >> 32)} {}

  // Four 32-bit random words for the 128-bit counter (c0, c1).
  Block operator()(uint64_t c0, uint64_t c1) const {
    Block ctr{uint32_t(c0), uint32_t(c0 >> 32), uint32_t(c1), uint32_t(c1 >> 32)};
    std::array<uint32_t, 2> key = key_;
    for (int round = 0; round < 10; ++round) {
      ctr = single_round(ctr, key);
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    return ctr;
  }

  uint64_t seed() const { return uint64_t(key_[0]) | (uint64_t(key_[1]) << 32); }

 private:
  static Block single_round(const Block& c, const std::array<uint32_t, 2>& k) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
    const uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
    return {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
            uint32_t(p0)};
  }

  std::array<uint32_t, 2> key_;
};

// A uniform float in [0, 1) from 24 random bits.
inline float uniform_from_bits(uint32_t bits) { return float(bits >> 8) * (1.0f / 16777216.0f); }

// A sequential generator over a Philox stream: (seed, stream) picks the stream, draws advance
// the counter. Used where a short run of numbers belongs to one coordinate (one sample's
// augmentation, one parameter's initialisation).
class RandomStream {
 public:
  RandomStream(uint64_t seed, uint64_t stream) : philox_(seed), stream_(stream) {}

  uint32_t next_u32() {
    if (used_ == 4) {
      block_ = philox_(counter_++, stream_);
      used_ = 0;
    }
    return block_[used_++];
  }
  float uniform() { return uniform_from_bits(next_u32()); }
  // How many 32-bit draws the stream has given since its start (what seek() moves to).
  uint64_t position() const { return 4 * counter_ - 4 + uint64_t(used_); }
  // Moves to the stream's `draw`-th 32-bit draw (0: its start), as if that many had been taken
  // from the start: the next next_u32() returns it. Lets chunks of one long run of numbers be
  // drawn on several threads with the sequential result.
  void seek(uint64_t draw) {
    counter_ = draw / 4;
    used_ = 4;
    if (const int skip = int(draw % 4); skip != 0) {
      block_ = philox_(counter_++, stream_);
      used_ = skip;
    }
  }
  // Uniform integer in [0, n) (n > 0); the modulo bias is below 2^-32 * n.
  uint64_t below(uint64_t n) {
    const uint64_t wide = (uint64_t(next_u32()) << 32) | next_u32();
    return wide % n;
  }
  // Standard normal by Box-Muller.
  float normal();
  // Uniform in the open interval (0, 1) from 53 random bits (two draws).
  double uniform_open() {
    const uint64_t wide = (uint64_t(next_u32()) << 32) | next_u32();
    return (double(wide >> 11) + 0.5) * 0x1p-53;
  }

 private:
  Philox philox_;
  uint64_t stream_;
  uint64_t counter_ = 0;
  Philox::Block block_{};
  int used_ = 4;
};

// Gamma(shape, 1) for shape > 0 (Marsaglia and Tsang's method; below 1 through
// Gamma(shape + 1) * U^(1/shape)) and Beta(a, b) = G_a / (G_a + G_b), in double arithmetic on the
// stream's draws (a varying number of them), so a draw is the same on every machine.
double sample_gamma(RandomStream& stream, double shape);
double sample_beta(RandomStream& stream, double a, double b);

// Mixes several coordinates into one 64-bit stream id (splitmix64 steps).
uint64_t mix_stream(uint64_t a, uint64_t b, uint64_t c = 0);

// A uniformly random permutation of 0..n-1: Fisher-Yates from the last place down, place i
// swapped with stream.below(i + 1) (an epoch's sample order, a minibatch order).
std::vector<int64_t> random_permutation(int64_t n, RandomStream& stream);

}  // namespace hg
