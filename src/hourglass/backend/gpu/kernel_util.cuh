// What every GPU kernel file shares: the element types (f32, and bf16/f16 stored as raw 16-bit
// words), their conversions to and from float, warp and block reductions that work for both
// CUDA's 32-lane warps and AMD's 64-lane wavefronts, launch helpers, and the host-side dtype
// dispatch. Included only by .cu files (compiled by nvcc or hipcc).
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"
#include "hourglass/tensor/dtype.h"

namespace hg::gpu {

// ---- element types: 16-bit floats as raw bits, converted by hand (identical on CUDA and HIP)

struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(bf16 v) {
  return __uint_as_float(uint32_t(v.bits) << 16);
}
__device__ inline float to_float(f16 v) {
  __half h;
  *reinterpret_cast<uint16_t*>(&h) = v.bits;
  return __half2float(h);
}

template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) { return v; }
template <>
__device__ inline bf16 from_float<bf16>(float v) {
  // Round to nearest even; NaN stays a (quiet) NaN.
  uint32_t u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}
template <>
__device__ inline f16 from_float<f16>(float v) {
  __half h = __float2half_rn(v);
  return f16{*reinterpret_cast<uint16_t*>(&h)};
}

// V consecutive elements loaded or stored as one aligned vector (16 bytes for the usual V).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// ---- warps: kWarp lanes (32 on NVIDIA, 64 on AMD CDNA)

#ifdef HOURGLASS_GPU_HIP
inline constexpr int kWarp = 64;
__device__ inline float shfl_xor(float v, int mask) { return __shfl_xor(v, mask); }
__device__ inline float shfl_down(float v, int delta) { return __shfl_down(v, delta); }
#else
inline constexpr int kWarp = 32;
__device__ inline float shfl_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
__device__ inline float shfl_down(float v, int delta) {
  return __shfl_down_sync(0xffffffffu, v, delta);
}
#endif

// Sum over the lanes of a warp; every lane gets the total.
__device__ inline float warp_sum(float v) {
  for (int m = kWarp / 2; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int m = kWarp / 2; m > 0; m >>= 1) v = fmaxf(v, shfl_xor(v, m));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of kWarp, at most 1024). `scratch` is
// shared memory of at least 1024 / kWarp floats. Thread 0 gets the total; the others get
// partial sums. Contains __syncthreads(): call from every thread of the block.
__device__ inline float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  v = int(threadIdx.x) < warps ? scratch[threadIdx.x] : 0.0f;
  if (warp == 0) v = warp_sum(v);
  __syncthreads();
  return v;
}

// ---- launches

// Blocks of `threads` for a grid-stride loop over n elements, capped so that the grid stays
// a few waves deep on large inputs.
inline unsigned grid_for(int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  return unsigned(blocks < 1 ? 1 : blocks);
}

// ---- dtype dispatch on the host: body.template operator()<T>() with T float, bf16 or f16.
// The host side has checked the dtype; another one is an internal error naming `op`.

template <typename Body>
decltype(auto) dispatch_float(const char* op, DType dtype, Body&& body) {
  switch (dtype) {
    case DType::F32: return body.template operator()<float>();
    case DType::BF16: return body.template operator()<bf16>();
    case DType::F16: return body.template operator()<f16>();
    default: unsupported_dtype(op, dtype);
  }
}

}  // namespace hg::gpu
