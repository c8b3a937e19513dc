// Launchers of the INT8 inference kernels (int8_kernels.cu), called by int8.cpp. Sizes are
// element counts; pointers are device memory; nothing is launched for an empty tensor.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// q[i] = round_half_even(float(x[i]) * inv_scale) saturated to s8 (out_unsigned false) or u8,
// NaN to 0; x f32, bf16 or f16.
void launch_quantize_int8(const void* x, DType dtype, int64_t n, float inv_scale, void* q,
                          bool out_unsigned, gpuStream_t stream);

// x[i] = float(q[i]) * scale, q s8 or u8 (q_unsigned).
void launch_dequantize_int8(const void* q, bool q_unsigned, int64_t n, float scale, float* x,
                            gpuStream_t stream);

// ops::max_pool2d_int8: y [n,p,q,c] the maximum of each window of x [n,h,w,c] (s8 or u8),
// padding left out.
struct Int8PoolShape {
  int64_t n, h, w, c, p, q;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};
void launch_max_pool2d_int8(const Int8PoolShape& shape, const void* x, bool x_unsigned, void* y,
                            gpuStream_t stream);

// The s8 convolution of ops::conv2d_int8 (x [n,h,w,c], w [k,r,s,c], NHWC, groups 1): the
// products summed exactly in int32, then the epilogue of Int8ConvParams in float (each step
// rounded as written, no fused multiply-add). x and residual s8 or u8 (x_unsigned,
// residual_unsigned), residual null for none; y u8 with relu, s8 without, f32 when f32_output.
// A direct kernel: a thread per output element.
struct Int8ConvShape {
  int64_t n, h, w, c, k, r, s, p, q;
  int64_t stride_h, stride_w, pad_h, pad_w;
};
struct Int8ConvEpilogue {
  const float* multiplier;  // [k]
  const float* bias;        // [k], in the sum's units
  const void* residual;     // [n,p,q,k] s8 or u8, or null
  bool residual_unsigned;
  float residual_multiplier;
  bool relu, f32_output;
  void* y;  // [n,p,q,k]
};
void launch_conv2d_int8(const Int8ConvShape& shape, const void* x, bool x_unsigned, const int8_t* w,
                        const Int8ConvEpilogue& epilogue, gpuStream_t stream);

}  // namespace hg::gpu
