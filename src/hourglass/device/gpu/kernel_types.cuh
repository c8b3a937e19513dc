// What every GPU kernel file shares, from the device layer up: the element types (f32, and
// bf16/f16 stored as raw 16-bit words), their conversions to and from float, and the grid size
// of a grid-stride loop. The copy kernels (device/gpu/copy_kernels.cu) use these; the backend's
// kernels get them through backend/gpu/kernel_util.cuh. Included only by .cu files (compiled by
// nvcc or hipcc).
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// ---- element types: 16-bit floats as raw bits, converted by hand (identical on CUDA and HIP)

struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(bf16 v) { return __uint_as_float(uint32_t(v.bits) << 16); }
__device__ inline float to_float(f16 v) {
  __half h;
  *reinterpret_cast<uint16_t*>(&h) = v.bits;
  return __half2float(h);
}

template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
  return v;
}
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

// ---- launches

// Blocks of `threads` for a grid-stride loop over n elements, capped so that the grid stays
// a few waves deep on large inputs.
inline unsigned grid_for(int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  return unsigned(blocks < 1 ? 1 : blocks);
}

}  // namespace hg::gpu
