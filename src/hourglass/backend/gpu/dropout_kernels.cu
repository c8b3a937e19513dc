// Dropout: each thread owns one Philox block, i.e. the four consecutive global indices
// 4g .. 4g+3 (g = counter), so every random word is computed once. Groups that lie wholly
// inside the tensor, with aligned pointers and offset % 4 == 0, load and store their four
// elements and mask bytes as single vector accesses.
#include <cstdint>

#include "hourglass/backend/gpu/dropout_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

// Philox4x32-10 exactly as hg::Philox (base/rng.h): counter (c0, 0), key = seed.
__device__ inline uint4 philox(uint64_t c0, uint64_t seed) {
  uint32_t c[4] = {uint32_t(c0), uint32_t(c0 >> 32), 0u, 0u};
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
    const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return make_uint4(c[0], c[1], c[2], c[3]);
}

// Group gi covers elements i = 4 gi - lead .. 4 gi - lead + 3, lead = offset % 4 (the part of
// the first Philox block that lies before element 0).
template <typename T, bool Aligned>
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ mask,
                   int64_t n, int64_t groups, uint32_t threshold, float scale, uint64_t seed,
                   uint64_t first_counter, int lead) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t gi = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; gi < groups; gi += stride) {
    uint32_t word[4] = {0u, 0u, 0u, 0u};
    if (threshold != 0) {  // p = 0 keeps everything: no random numbers needed
      const uint4 b = philox(first_counter + uint64_t(gi), seed);
      word[0] = b.x;
      word[1] = b.y;
      word[2] = b.z;
      word[3] = b.w;
    }
    uint8_t keep[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) keep[w] = uint8_t((word[w] >> 8) >= threshold);
    const int64_t base = 4 * gi - lead;
    if (Aligned && base + 3 < n) {  // Aligned implies lead == 0, so base >= 0
      const Pack<T, 4> in = reinterpret_cast<const Pack<T, 4>*>(x + base)[0];
      Pack<T, 4> out;
#pragma unroll
      for (int w = 0; w < 4; ++w)
        out.v[w] = from_float<T>(to_float(in.v[w]) * (float(keep[w]) * scale));
      reinterpret_cast<Pack<T, 4>*>(y + base)[0] = out;
      reinterpret_cast<uchar4*>(mask + base)[0] = make_uchar4(keep[0], keep[1], keep[2], keep[3]);
    } else {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int64_t i = base + w;
        if (i < 0 || i >= n) continue;
        mask[i] = keep[w];
        y[i] = from_float<T>(to_float(x[i]) * (float(keep[w]) * scale));
      }
    }
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    dropout_backward_kernel(const T* __restrict__ dy, const uint8_t* __restrict__ mask,
                            T* __restrict__ dx, int64_t n, float scale) {
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < packs; i += stride) {
    const Pack<T, V> g = reinterpret_cast<const Pack<T, V>*>(dy)[i];
    const Pack<uint8_t, V> m = reinterpret_cast<const Pack<uint8_t, V>*>(mask)[i];
    Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k)
      out.v[k] = from_float<T>(to_float(g.v[k]) * (float(m.v[k]) * scale));
    reinterpret_cast<Pack<T, V>*>(dx)[i] = out;
  }
  const int64_t t = packs * V + tid;
  if (t < n) dx[t] = from_float<T>(to_float(dy[t]) * (float(mask[t]) * scale));
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void launch_dropout(const void* x, void* y, uint8_t* mask, int64_t n, uint32_t threshold,
                    float scale, uint64_t seed, uint64_t offset, DType dtype, gpuStream_t stream) {
  if (n <= 0) return;
  const int lead = int(offset % 4);
  const uint64_t first_counter = offset / 4;
  const int64_t groups = (int64_t(lead) + n + 3) / 4;
  dispatch_float("dropout", dtype, [&]<typename T>() {
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const bool vec =
        lead == 0 && aligned(xs, 4 * sizeof(T)) && aligned(ys, 4 * sizeof(T)) && aligned(mask, 4);
    if (vec)
      dropout_kernel<T, true><<<grid_for(groups, kThreads), kThreads, 0, stream>>>(
          xs, ys, mask, n, groups, threshold, scale, seed, first_counter, lead);
    else
      dropout_kernel<T, false><<<grid_for(groups, kThreads), kThreads, 0, stream>>>(
          xs, ys, mask, n, groups, threshold, scale, seed, first_counter, lead);
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_dropout_backward(const void* dy, const uint8_t* mask, void* dx, int64_t n, float scale,
                             DType dtype, gpuStream_t stream) {
  if (n <= 0) return;
  dispatch_float("dropout_backward", dtype, [&]<typename T>() {
    const T* g = static_cast<const T*>(dy);
    T* out = static_cast<T*>(dx);
    if (aligned(g, 4 * sizeof(T)) && aligned(out, 4 * sizeof(T)) && aligned(mask, 4))
      dropout_backward_kernel<T, 4>
          <<<grid_for(n / 4 > 0 ? n / 4 : 1, kThreads), kThreads, 0, stream>>>(g, mask, out, n,
                                                                               scale);
    else
      dropout_backward_kernel<T, 1>
          <<<grid_for(n, kThreads), kThreads, 0, stream>>>(g, mask, out, n, scale);
  });
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
