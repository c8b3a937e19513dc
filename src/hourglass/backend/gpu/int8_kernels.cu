// INT8 inference kernels: quantise, dequantise, and a direct s8 convolution. The convolution is
// the plain one (a thread per output element, its products summed over the window in int32):
// it gives the GPU the exact arithmetic of the CPU's oneDNN kernel, against which it is tested,
// not the speed of the tensor cores.
#include <cstdint>

#include "hourglass/backend/gpu/int8_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

__device__ inline int8_t saturate_round(float v) {
  const float r = rintf(v);  // round half to even
  return r >= 127.0f ? int8_t(127) : r <= -128.0f ? int8_t(-128) : r == r ? int8_t(r) : int8_t(0);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const T* __restrict__ x, int64_t n, float inv_scale, int8_t* __restrict__ q) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    q[i] = saturate_round(__fmul_rn(to_float(x[i]), inv_scale));
}

__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const int8_t* __restrict__ q, int64_t n, float scale, float* __restrict__ x) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = __fmul_rn(float(q[i]), scale);
}

__global__ void __launch_bounds__(kThreads)
    conv2d_int8_kernel(Int8ConvShape g, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
                       const float* __restrict__ multiplier, const float* __restrict__ bias,
                       const int8_t* __restrict__ residual, float residual_multiplier, bool relu,
                       bool f32_output, void* __restrict__ y, int64_t total) {
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
        const int8_t* xp = x + ((b * g.h + iy) * g.w + ix) * g.c;
        const int8_t* wp = w + ((k * g.r + r) * g.s + s) * g.c;
        for (int64_t c = 0; c < g.c; ++c) acc += int32_t(xp[c]) * int32_t(wp[c]);
      }
    }
    float v = __fmul_rn(__fadd_rn(float(acc), bias[k]), multiplier[k]);
    if (residual != nullptr) v = __fadd_rn(v, __fmul_rn(float(residual[i]), residual_multiplier));
    if (relu) v = fmaxf(v, 0.0f);
    if (f32_output)
      static_cast<float*>(y)[i] = v;
    else
      static_cast<int8_t*>(y)[i] = saturate_round(v);
  }
}

}  // namespace

void launch_quantize_int8(const void* x, DType dtype, int64_t n, float inv_scale, int8_t* q,
                          gpuStream_t stream) {
  if (n == 0) return;
  dispatch_float("quantize_int8", dtype, [&]<typename T>() {
    quantize_kernel<T>
        <<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const T*>(x), n, inv_scale, q);
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_dequantize_int8(const int8_t* q, int64_t n, float scale, float* x, gpuStream_t stream) {
  if (n == 0) return;
  dequantize_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(q, n, scale, x);
  HG_GPU_CHECK_LAUNCH();
}

void launch_conv2d_int8(const Int8ConvShape& shape, const int8_t* x, const int8_t* w,
                        const float* multiplier, const float* bias, const int8_t* residual,
                        float residual_multiplier, bool relu, bool f32_output, void* y,
                        gpuStream_t stream) {
  const int64_t total = shape.n * shape.p * shape.q * shape.k;
  if (total == 0) return;
  conv2d_int8_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(
      shape, x, w, multiplier, bias, residual, residual_multiplier, relu, f32_output, y, total);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
