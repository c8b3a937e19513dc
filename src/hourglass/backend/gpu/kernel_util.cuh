// What the backend's GPU kernel files share: the element types, their conversions and the
// launch helpers (device/gpu/kernel_types.cuh, shared with the device layer's copy kernels),
// vector loads, warp and block reductions that work for every warp width (CUDA's 32 lanes, AMD's
// 64-lane CDNA and 32-lane RDNA wavefronts), and the host-side dtype dispatch. Included only by .cu
// files (compiled by nvcc or hipcc).
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/kernel_types.cuh"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// V consecutive elements loaded or stored as one aligned vector (16 bytes for the usual V).
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// ---- warps: kWarp lanes, the compile target's width: 32 on NVIDIA; on AMD 64 on CDNA and GCN
// (gfx9: MI200, MI300, MI350) and 32 on RDNA (gfx10, gfx11, gfx12: Radeon), as the compiler
// gives it for each --offload-arch (__AMDGCN_WAVEFRONT_SIZE). A HIP compile also has a host pass
// that targets no GPU: there kWarp is a value that only device code can read (a __device__
// conversion with no definition: device functions are parsed there, never emitted), so host
// code that sizes a launch by it does not compile. The host asks the device instead
// (current_warp_width(), device/gpu/runtime.h). No shuffle, ballot or reduction of the GPU tree
// takes a literal width (tests/tools/check_warp_width.sh).

#ifdef HOURGLASS_GPU_HIP
#if defined(__HIP_DEVICE_COMPILE__)
#ifndef __AMDGCN_WAVEFRONT_SIZE
#error "hourglass: the compiler defines no __AMDGCN_WAVEFRONT_SIZE for this AMD GPU target"
#endif
inline constexpr int kWarp = __AMDGCN_WAVEFRONT_SIZE;
#else
struct DeviceWarpWidth {
  __device__ operator int() const;
};
inline constexpr DeviceWarpWidth kWarp{};
#endif
__device__ inline float shfl_xor(float v, int mask) { return __shfl_xor(v, mask, kWarp); }
__device__ inline float shfl_down(float v, int delta) { return __shfl_down(v, delta, kWarp); }
#else
inline constexpr int kWarp = 32;
// Every lane of a 32-lane warp.
inline constexpr unsigned kFullWarpMask = ~0u;
__device__ inline float shfl_xor(float v, int mask) {
  return __shfl_xor_sync(kFullWarpMask, v, mask, kWarp);
}
__device__ inline float shfl_down(float v, int delta) {
  return __shfl_down_sync(kFullWarpMask, v, delta, kWarp);
}
#endif

// The most warps a block holds: 1024 threads at the narrowest width, 32 lanes (NVIDIA, RDNA).
// Sizes block_sum's scratch, which must be a constant in every compile pass.
inline constexpr int kMaxWarpsPerBlock = 1024 / 32;

// Blocks of `threads` threads for one warp per row over `rows` rows, on the current device (its
// warp width, which the host's compile does not know): for kernels whose warps take a row each.
inline unsigned warp_per_row_blocks(int64_t rows, int threads) {
  const int64_t rows_per_block = threads / current_warp_width();
  return unsigned((rows + rows_per_block - 1) / rows_per_block);
}

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
// shared memory of kMaxWarpsPerBlock floats. Thread 0 gets the total; the others get
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
