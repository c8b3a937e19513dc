// Launchers of the INT8 inference kernels (int8_kernels.cu), called by int8.cpp. Sizes are
// element counts; pointers are device memory; nothing is launched for an empty tensor.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// q[i] = s8(round_half_even(float(x[i]) * inv_scale)), saturated, NaN to 0; x f32, bf16 or f16.
void launch_quantize_int8(const void* x, DType dtype, int64_t n, float inv_scale, int8_t* q,
                          gpuStream_t stream);

// x[i] = float(q[i]) * scale.
void launch_dequantize_int8(const int8_t* q, int64_t n, float scale, float* x, gpuStream_t stream);

// The s8 convolution of ops::conv2d_int8 (x [n,h,w,c], w [k,r,s,c], NHWC, groups 1): one thread
// per output element, the products summed exactly in int32, then the epilogue of
// Int8ConvParams in float (each step rounded as written, no fused multiply-add). residual null
// for none; y s8, or f32 when f32_output.
struct Int8ConvShape {
  int64_t n, h, w, c, k, r, s, p, q;
  int64_t stride_h, stride_w, pad_h, pad_w;
};
void launch_conv2d_int8(const Int8ConvShape& shape, const int8_t* x, const int8_t* w,
                        const float* multiplier, const float* bias, const int8_t* residual,
                        float residual_multiplier, bool relu, bool f32_output, void* y,
                        gpuStream_t stream);

}  // namespace hg::gpu
