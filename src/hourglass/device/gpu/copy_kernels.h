// Launchers of the copy and fill kernels (copy_kernels.cu), called by copy.cpp. Raw device
// pointers, element strides and dtypes; work is issued to `stream` and not waited for.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

inline constexpr int kMaxCopyDims = 8;

// A walk over `shape` (outermost dimension first) with element strides for the destination and
// the source. copy.cpp drops dimensions of size 1 and merges dimensions that are contiguous in
// both before launching, so most copies arrive as one dimension.
struct CopyLayout {
  int ndim = 0;
  int64_t shape[kMaxCopyDims] = {};
  int64_t dst_strides[kMaxCopyDims] = {};
  int64_t src_strides[kMaxCopyDims] = {};  // unused by fills

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
};

// dst[i] = src[i] converted from src_dtype to dst_dtype (the CPU's conversions: float to
// integer truncates like a C cast, to bf16/f16 rounds to nearest even) for every element of
// `layout`. Strides are non-negative, in elements of each side's dtype.
void launch_copy(void* dst, DType dst_dtype, const void* src, DType src_dtype,
                 const CopyLayout& layout, gpuStream_t stream);

// Every element of `layout` (dst_strides) set to `pattern`: the element's bytes, the low
// `itemsize` (1, 2, 4 or 8) bytes of the word.
void launch_fill(void* dst, size_t itemsize, uint64_t pattern, const CopyLayout& layout,
                 gpuStream_t stream);

}  // namespace hg::gpu
