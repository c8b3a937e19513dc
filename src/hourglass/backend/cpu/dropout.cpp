// Dropout on the CPU. Element i's fate is a pure function of (seed, offset + i): global index
// k = offset + i uses 32-bit word k % 4 of the Philox block for counter (k / 4, 0), and is kept
// when its 24-bit uniform u = uniform_from_bits(word) satisfies u >= p (probability 1 - p).
// The GPU backends use the same rule, so masks agree across devices and thread counts, and a
// resumed run can recompute any step's mask from its offset.
#include <cmath>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/rng.h"

namespace hg {

using cpu::compute_t;
using cpu::dispatch_storage;
using cpu::narrow;
using cpu::widen;

namespace {

constexpr int64_t kGrain = int64_t(1) << 14;  // Philox costs ~10 multiplies per 4 elements

// The integer form of `uniform_from_bits(bits) >= p`: (bits >> 8) / 2^24 >= p exactly when
// (bits >> 8) >= ceil(p * 2^24), and p * 2^24 is exact in double.
uint32_t keep_threshold(double p) { return uint32_t(std::ceil(p * 16777216.0)); }

}  // namespace

ops::DropoutForward CpuBackend::dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  ops::DropoutForward out;
  out.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  out.mask = Tensor::empty(x.shape(), DType::U8, x.device());
  const int64_t n = x.numel();
  uint8_t* mask = out.mask.data<uint8_t>();
  if (p == 0.0) {  // identity: skip the random numbers altogether
    out.y.copy_(x);
    out.mask.fill_(1.0);
    return out;
  }
  const Philox philox(seed);
  const uint32_t threshold = keep_threshold(p);
  dispatch_storage("dropout", x, [&]<typename T>() {
    using C = compute_t<T>;
    const T* src = x.data<T>();
    T* dst = out.y.data<T>();
    const C scale = C(1.0 / (1.0 - p));
    parallel_for_inline(n, kGrain, [&](int64_t begin, int64_t end) {
      // Masks first, one Philox block per four consecutive global indices...
      Philox::Block block{};
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t k = offset + uint64_t(i);
        if (i == begin || k % 4 == 0) block = philox(k / 4, 0);
        mask[i] = uint8_t((block[k % 4] >> 8) >= threshold);
      }
      // ...then the scaling as a separate, vectorisable pass.
      for (int64_t i = begin; i < end; ++i)
        dst[i] = narrow<T>(widen(src[i]) * (C(mask[i]) * scale));
    });
  });
  return out;
}

Tensor CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask0, double p) {
  check_dtype("dropout_backward", "mask", mask0, DType::U8);
  check_same_device("dropout_backward", dy, mask0);
  HG_CHECK(p >= 0.0 && p < 1.0, "dropout_backward: p must be in [0, 1), got {}", p);
  const Tensor mask = mask0.contiguous();
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
  dispatch_storage("dropout_backward", dy, [&]<typename T>() {
    using C = compute_t<T>;
    const T* g = dy.data<T>();
    const uint8_t* m = mask.data<uint8_t>();
    T* out = dx.data<T>();
    const C scale = C(1.0 / (1.0 - p));
    parallel_for_inline(dy.numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = narrow<T>(widen(g[i]) * (C(m[i]) * scale));
    });
  });
  return dx;
}

}  // namespace hg
