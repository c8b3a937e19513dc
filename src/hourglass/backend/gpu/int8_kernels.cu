// INT8 inference kernels: quantise, dequantise, max pooling in 8 bits, and the direct s8
// convolution (a thread per output element, its products summed over the window in int32): it
// gives the GPU the exact arithmetic of the CPU's oneDNN kernel, against which it is tested, not
// the speed of the tensor cores.
#include <cstdint>
#include <type_traits>

#include "hourglass/backend/gpu/int8_arith.cuh"
#include "hourglass/backend/gpu/int8_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const T* __restrict__ x, int64_t n, float inv_scale, void* __restrict__ q,
                    bool out_unsigned) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = __fmul_rn(to_float(x[i]), inv_scale);
    if (out_unsigned)
      static_cast<uint8_t*>(q)[i] = uint8_t(saturate_round(v, 0.0f, 255.0f));
    else
      static_cast<int8_t*>(q)[i] = int8_t(saturate_round(v, -128.0f, 127.0f));
  }
}

__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const void* __restrict__ q, bool q_unsigned, int64_t n, float scale,
                      float* __restrict__ x) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = __fmul_rn(float(int8_at(q, q_unsigned, i)), scale);
}

__global__ void __launch_bounds__(kThreads)
    conv2d_int8_kernel(Int8ConvShape g, const void* __restrict__ x, bool x_unsigned,
                       const int8_t* __restrict__ w, Int8ConvEpilogue e, int64_t total) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t k = i % g.k, oq = (i / g.k) % g.q, op = (i / (g.k * g.q)) % g.p;
    const int64_t b = i / (g.k * g.q * g.p);
    int32_t acc = 0;
    for (int64_t r = 0; r < g.r; ++r) {
      const int64_t iy = op * g.stride_h - g.pad_h + r;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t s = 0; s < g.s; ++s) {
        const int64_t ix = oq * g.stride_w - g.pad_w + s;
        if (ix < 0 || ix >= g.w) continue;
        const int64_t xo = ((b * g.h + iy) * g.w + ix) * g.c;
        const int8_t* wp = w + ((k * g.r + r) * g.s + s) * g.c;
        for (int64_t c = 0; c < g.c; ++c) acc += int8_at(x, x_unsigned, xo + c) * int32_t(wp[c]);
      }
    }
    int8_conv_epilogue(e, acc, k, i);
  }
}

template <typename Q>
__global__ void __launch_bounds__(kThreads)
    max_pool2d_int8_kernel(Int8PoolShape g, const Q* __restrict__ x, Q* __restrict__ y,
                           int64_t total) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t k = i % g.c, ox = (i / g.c) % g.q, oy = (i / (g.c * g.q)) % g.p;
    const int64_t b = i / (g.c * g.q * g.p);
    const int64_t y0 = max(int64_t(0), oy * g.stride_h - g.pad_h);
    const int64_t y1 = min(g.h, oy * g.stride_h - g.pad_h + g.kernel_h);
    const int64_t x0 = max(int64_t(0), ox * g.stride_w - g.pad_w);
    const int64_t x1 = min(g.w, ox * g.stride_w - g.pad_w + g.kernel_w);
    int32_t m = std::is_same_v<Q, uint8_t> ? 0 : -128;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix)
        m = max(m, int32_t(x[((b * g.h + iy) * g.w + ix) * g.c + k]));
    y[i] = Q(m);
  }
}

}  // namespace

void launch_max_pool2d_int8(const Int8PoolShape& g, const void* x, bool x_unsigned, void* y,
                            gpuStream_t stream) {
  const int64_t total = g.n * g.p * g.q * g.c;
  if (total == 0) return;
  if (x_unsigned)
    max_pool2d_int8_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        g, static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), total);
  else
    max_pool2d_int8_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        g, static_cast<const int8_t*>(x), static_cast<int8_t*>(y), total);
  HG_GPU_CHECK_LAUNCH();
}

void launch_quantize_int8(const void* x, DType dtype, int64_t n, float inv_scale, void* q,
                          bool out_unsigned, gpuStream_t stream) {
  if (n == 0) return;
  dispatch_float("quantize_int8", dtype, [&]<typename T>() {
    quantize_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const T*>(x), n,
                                                                       inv_scale, q, out_unsigned);
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_dequantize_int8(const void* q, bool q_unsigned, int64_t n, float scale, float* x,
                            gpuStream_t stream) {
  if (n == 0) return;
  dequantize_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(q, q_unsigned, n, scale, x);
  HG_GPU_CHECK_LAUNCH();
}

void launch_conv2d_int8(const Int8ConvShape& shape, const void* x, bool x_unsigned, const int8_t* w,
                        const Int8ConvEpilogue& epilogue, gpuStream_t stream) {
  const int64_t total = shape.n * shape.p * shape.q * shape.k;
  if (total == 0) return;
  conv2d_int8_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(shape, x, x_unsigned, w,
                                                                         epilogue, total);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
