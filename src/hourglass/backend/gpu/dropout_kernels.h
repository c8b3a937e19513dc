// Launchers of the dropout kernels (dropout_kernels.cu), called by dropout.cpp. x / y / dy / dx
// are n contiguous elements of `dtype` (f32, bf16 or f16); mask is n bytes (1 = kept).
//
// The mask is the CPU's, bit for bit: element i (global index k = offset + i) is kept when
// (word >> 8) >= threshold, word being 32-bit word k % 4 of Philox4x32-10(seed) at counter
// (k / 4, 0), and threshold = ceil(p * 2^24). Kept values are scaled by `scale` = 1 / (1 - p)
// rounded to f32: y = x * (mask * scale), as the CPU computes it. Nothing is launched for n = 0.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

void launch_dropout(const void* x, void* y, uint8_t* mask, int64_t n, uint32_t threshold,
                    float scale, uint64_t seed, uint64_t offset, DType dtype, gpuStream_t stream);

// dx = dy * (mask * scale)
void launch_dropout_backward(const void* dy, const uint8_t* mask, void* dx, int64_t n, float scale,
                             DType dtype, gpuStream_t stream);

}  // namespace hg::gpu
