// Launchers of the pooling kernels (pooling_kernels.cu), called by pooling.cpp. Tensors are
// contiguous NHWC in `dtype` (f32, bf16 or f16), accumulated in float.
//
// Max pooling's workspace (this backend's format) is one value per output element [N,P,Q,C]
// naming the window's arg-max (first maximum in window order, as oneDNN on the CPU; padding
// never wins): for windows of at most kMaxPoolU8Window positions a u8, its place in the window
// r * kernel_w + s (a quarter of the bytes: ResNet-50's stem pool writes and its backward reads
// 51 MB instead of 205 MB a step), else an i32, the input position h * W + w; kNoArgMax
// (255 / -1) for a window with no input position. Backward gathers: each input element adds the
// gradients of the outputs whose arg-max it is, so no atomics are needed and results are
// deterministic.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

struct PoolGeometry {
  int64_t n, h, w, c;  // input [N,H,W,C]
  int64_t p, q;        // output [N,P,Q,C]
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

inline constexpr int64_t kMaxPoolU8Window = 255;
// The workspace's dtype for `g`: U8 or I32 (above).
DType max_pool_workspace_dtype(const PoolGeometry& g);

void launch_max_pool(const void* x, void* y, void* argmax, const PoolGeometry& g, DType dtype,
                     gpuStream_t stream);
// dx (every element written) from dy and the forward's argmax.
void launch_max_pool_backward(const void* dy, const void* argmax, void* dx, const PoolGeometry& g,
                              DType dtype, gpuStream_t stream);
// Padding counts towards the divisor: every window divides by kernel_h * kernel_w.
void launch_avg_pool(const void* x, void* y, const PoolGeometry& g, DType dtype,
                     gpuStream_t stream);
void launch_avg_pool_backward(const void* dy, void* dx, const PoolGeometry& g, DType dtype,
                              gpuStream_t stream);

// y [N,C] = mean over the hw positions of x [N,hw,C] (deterministic order).
void launch_global_avg_pool(const void* x, void* y, int64_t n, int64_t hw, int64_t c, DType dtype,
                            gpuStream_t stream);
// dx [N,hw,C] = dy [N,C] / hw.
void launch_global_avg_pool_backward(const void* dy, void* dx, int64_t n, int64_t hw, int64_t c,
                                     DType dtype, gpuStream_t stream);

}  // namespace hg::gpu
