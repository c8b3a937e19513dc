// The arithmetic an INT8 convolution kernel has to match bit for bit: reading s8/u8 elements,
// the rounding to 8 bits, and the requantising epilogue of ops::conv2d_int8, each step rounded as
// written (no fused multiply-add), so that every kernel gives the same bits for the same int32
// sum.
#pragma once

#include <cstdint>

#include "hourglass/backend/gpu/int8_kernels.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// round half to even, saturated to [lo, hi]; NaN to 0.
__device__ inline float saturate_round(float v, float lo, float hi) {
  const float r = rintf(v);
  return r >= hi ? hi : r <= lo ? lo : r == r ? r : 0.0f;
}

// Element i of an s8 or u8 tensor.
__device__ inline int32_t int8_at(const void* p, bool is_unsigned, int64_t i) {
  return is_unsigned ? int32_t(static_cast<const uint8_t*>(p)[i])
                     : int32_t(static_cast<const int8_t*>(p)[i]);
}

// Output element i (channel k) from its int32 sum: (acc + bias) * multiplier, plus the
// residual times its multiplier, ReLU, then u8 (with ReLU), s8, or f32.
__device__ inline void int8_conv_epilogue(const Int8ConvEpilogue& e, int32_t acc, int64_t k,
                                          int64_t i) {
  float v = __fmul_rn(__fadd_rn(float(acc), e.bias[k]), e.multiplier[k]);
  if (e.residual != nullptr)
    v = __fadd_rn(
        v, __fmul_rn(float(int8_at(e.residual, e.residual_unsigned, i)), e.residual_multiplier));
  if (e.relu) v = fmaxf(v, 0.0f);
  if (e.f32_output)
    static_cast<float*>(e.y)[i] = v;
  else if (e.relu)
    static_cast<uint8_t*>(e.y)[i] = uint8_t(saturate_round(v, 0.0f, 255.0f));
  else
    static_cast<int8_t*>(e.y)[i] = int8_t(saturate_round(v, -128.0f, 127.0f));
}

}  // namespace hg::gpu
