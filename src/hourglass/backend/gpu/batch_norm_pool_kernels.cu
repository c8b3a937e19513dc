// Batch norm + ReLU + 3x3 stride-2 max pooling in training (an image network's stem):
// z = relu(bn(x)) is computed inside the pooling pass and never stored. Apart, the normalising
// pass reads x and writes z, and the pooling pass reads z back: ResNet-50's stem output is
// 411 MB in bf16 a step, so two passes over it fewer.
//
// The statistics are batch_norm_kernels.cu's kernel (batch_norm_common.cuh). Then one thread
// per pooled output and 8 channels: it normalises the nine inputs of its window as
// batch_norm_normalize_kernel does (the same f32 expression, the ReLU, one rounding to T),
// keeps the first maximum of the rounded values as the pooling kernel does (the same value and
// arg-max record), and stores the ReLU mask bytes of the 2x2 inputs at the window's centre
// and below-right, rows 2p, 2p + 1 and columns 2q, 2q + 1: with an even height and width those
// blocks tile the input, so every mask byte is written once. Same bits as
// batch_norm_relu_train_launch followed by launch_max_pool.
//
// The backward's sums pass gathers the gradient of relu(bn(x)) from the pooled gradient and
// the arg-max record while it reduces, and stores it for the dx pass: the pooling's backward
// pass, which wrote that gradient for the sums pass to read back, is gone.
#include "hourglass/backend/gpu/batch_norm_common.cuh"
#include "hourglass/backend/gpu/batch_norm_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {
namespace {

using namespace bn;  // the kernels' shared pieces (batch_norm_common.cuh)

constexpr int kPoolThreads = 256;
constexpr int kVec = 8;          // channels a thread: one 16-byte load of a 16-bit type
constexpr uint8_t kNoArg = 255;  // the u8 arg-max record of a window without inputs

// Flat indices are 32-bit: the launcher checks that the input's elements fit.
template <typename T>
__global__ void __launch_bounds__(kPoolThreads)
    batch_norm_relu_max_pool_kernel(const T* __restrict__ x, T* __restrict__ y,
                                    uint8_t* __restrict__ argmax, uint8_t* __restrict__ mask, int h,
                                    int w, int channels, int p, int q, unsigned total,
                                    const float* __restrict__ weight,
                                    const float* __restrict__ bias,
                                    const float* __restrict__ mean_in,
                                    const float* __restrict__ invstd) {
  const unsigned vectors = unsigned(channels / kVec);
  for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const unsigned cv = t % vectors;
    unsigned rest = t / vectors;
    const int oq = int(rest % unsigned(q));
    rest /= unsigned(q);
    const int op = int(rest % unsigned(p));
    const int image = int(rest / unsigned(p));
    float mean[kVec], scale[kVec], shift[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int c = int(cv) * kVec + i;
      mean[i] = mean_in[c];
      scale[i] = weight[c] * invstd[c];
      shift[i] = bias[c];
    }
    float best[kVec];
    uint8_t arg[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      best[i] = -INFINITY;
      arg[i] = kNoArg;
    }
    const int image_row = image * h;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      const int row = 2 * op - 1 + r;
      if (row < 0 || row >= h) continue;
#pragma unroll
      for (int s = 0; s < 3; ++s) {
        const int col = 2 * oq - 1 + s;
        if (col < 0 || col >= w) continue;
        const int pixel = (image_row + row) * w + col;
        const Pack<T, kVec> xs = load_pack<T, kVec>(x + pixel * channels + int(cv) * kVec);
        unsigned bits = 0;
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          float v = (to_float(xs.v[i]) - mean[i]) * scale[i] + shift[i];
          v = v < 0.0f ? 0.0f : v;
          const float z = to_float(from_float<T>(v));
          bits |= unsigned(z > 0.0f) << i;
          if (arg[i] == kNoArg || z > best[i]) {  // the first maximum wins ties
            best[i] = z;
            arg[i] = uint8_t(r * 3 + s);
          }
        }
        if (r >= 1 && s >= 1) mask[pixel * (channels / 8) + int(cv)] = uint8_t(bits);
      }
    }
    const int out = ((image * p + op) * q + oq) * channels + int(cv) * kVec;
    Pack<T, kVec> ys;
    Pack<uint8_t, kVec> as;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      ys.v[i] = from_float<T>(best[i]);
      as.v[i] = arg[i];
    }
    *reinterpret_cast<Pack<T, kVec>*>(y + out) = ys;
    *reinterpret_cast<Pack<uint8_t, kVec>*>(argmax + out) = as;
  }
}

// The backward's sums pass, batch_norm_grad_sums_kernel's with the gradient of relu(bn(x))
// gathered from the pooled gradient: row (image, h, w) sums the gradients of the windows whose
// arg-max record names it, in window order, and rounds the sum to T, as
// max_pool_backward_stride2 computes dz; the ReLU mask is applied, the per-channel sums of dz
// and dz * (x - mean) are reduced and dz is stored for the dx pass. With an even height and
// width, input row h lies in windows h / 2 and, when h is odd, h / 2 + 1 (if it exists).
template <typename T>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_pool_grad_sums_kernel(
    const T* __restrict__ dy, const uint8_t* __restrict__ argmax, const T* __restrict__ x, int h,
    int w, int p, int q, int64_t rows, int64_t channels, int64_t rows_per_block,
    const float* __restrict__ mean_in, const float* __restrict__ invstd, float* dweight,
    float* dbias, float* part_dy, float* part_dyx, unsigned* counters,
    const uint8_t* __restrict__ mask, T* __restrict__ dz) {
  constexpr int V = kVec;
  __shared__ float s_dy[kThreads * V];
  __shared__ float s_dyx[kThreads * V];
  __shared__ unsigned s_ticket;
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  const int64_t mask_stride = channels / 8;

  float sum_dy[V], sum_dyx[V];
#pragma unroll
  for (int i = 0; i < V; ++i) sum_dy[i] = sum_dyx[i] = 0.0f;
  if (vector * V < channels) {
    float mean[V];
#pragma unroll
    for (int i = 0; i < V; ++i) mean[i] = mean_in[vector * V + i];
    for (int64_t o = ty; o < len; o += by) {
      const int64_t row = first + o;
      const int64_t offset = row * channels + vector * V;
      const Pack<T, V> xs = load_pack<T, V>(x + offset);
      const unsigned bits = unsigned(mask[row * mask_stride + vector]);
      const unsigned pixel = unsigned(row);
      const int col = int(pixel % unsigned(w));
      const unsigned image_row = pixel / unsigned(w);
      const int in_row = int(image_row % unsigned(h));
      const int image = int(image_row / unsigned(h));
      const int p0 = in_row >> 1, p1 = min(p - 1, (in_row + 1) >> 1);
      const int q0 = col >> 1, q1 = min(q - 1, (col + 1) >> 1);
      float acc[V];
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] = 0.0f;
      for (int wp = p0; wp <= p1; ++wp)
        for (int wq = q0; wq <= q1; ++wq) {
          const int64_t out = ((int64_t(image) * p + wp) * q + wq) * channels + vector * V;
          const Pack<uint8_t, V> a = *reinterpret_cast<const Pack<uint8_t, V>*>(argmax + out);
          const Pack<T, V> d = load_pack<T, V>(dy + out);
          // This input's place in window (wp, wq): row in_row - (2 wp - 1), column likewise.
          const uint8_t pos = uint8_t((in_row - 2 * wp + 1) * 3 + (col - 2 * wq + 1));
#pragma unroll
          for (int i = 0; i < V; ++i)
            if (a.v[i] == pos) acc[i] += to_float(d.v[i]);
        }
      float g[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        g[i] = (bits >> i) & 1u ? to_float(from_float<T>(acc[i])) : 0.0f;
        sum_dy[i] += g[i];
        sum_dyx[i] += g[i] * (to_float(xs.v[i]) - mean[i]);
      }
      store_row<T, V>(dz + offset, g);
    }
  }
  const int e = ty * int(blockDim.x) * V + int(threadIdx.x) * V;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    s_dy[e + i] = sum_dy[i];
    s_dyx[e + i] = sum_dyx[i];
  }
  if (!reduce_column<V>(s_dy, s_dyx, &s_ticket, SumMerge{}, rows, channels, rows_per_block, part_dy,
                        part_dyx, counters))
    return;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int width = int(blockDim.x) * V;
  const int64_t c = int64_t(blockIdx.x) * width + t;
  if (t < width && c < channels) {
    dbias[c] = s_dy[t];
    dweight[c] = invstd[c] * s_dyx[t];
  }
}

}  // namespace

bool batch_norm_relu_max_pool_fits(const BatchNormPlan& plan, DType dtype, const PoolGeometry& g) {
  return dtype_size(dtype) == 2 && plan.vec == kVec && g.kernel_h == 3 && g.kernel_w == 3 &&
         g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 1 && g.pad_w == 1 && g.h % 2 == 0 &&
         g.w % 2 == 0 && g.p == g.h / 2 && g.q == g.w / 2 && g.c % kVec == 0 &&
         g.n * g.h * g.w * g.c < (int64_t(1) << 31);
}

void batch_norm_relu_max_pool_train_launch(const BatchNormPlan& plan, DType dtype,
                                           const PoolGeometry& g, const void* x, void* y,
                                           uint8_t* argmax, uint8_t* mask,
                                           const BatchNormTrainPointers& bn, double momentum,
                                           double eps, float* workspace, unsigned* counters,
                                           gpuStream_t stream) {
  const int64_t rows = g.n * g.h * g.w;
  if (rows == 0 || g.c == 0) return;
  const char* op = "batch_norm_relu_max_pool_train";
  dispatch_float(op, dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      const T* xt = static_cast<const T*>(x);
      batch_norm_stats_kernel<T, kVec>
          <<<dim3(unsigned(plan.columns), unsigned(plan.row_blocks)), block_of(plan), 0, stream>>>(
              xt, rows, g.c, plan.rows_per_block, bn.running_mean, bn.running_var, momentum, eps,
              bn.save_mean, bn.save_invstd, workspace, workspace + plan.row_blocks * g.c, counters);
      HG_GPU_CHECK_LAUNCH();
      const int64_t total = g.n * g.p * g.q * (g.c / kVec);
      batch_norm_relu_max_pool_kernel<T>
          <<<grid_for(total, kPoolThreads), kPoolThreads, 0, stream>>>(
              xt, static_cast<T*>(y), argmax, mask, int(g.h), int(g.w), int(g.c), int(g.p),
              int(g.q), unsigned(total), bn.weight, bn.bias, bn.save_mean, bn.save_invstd);
      HG_GPU_CHECK_LAUNCH();
    } else {
      unsupported_dtype(op, dtype);  // batch_norm_relu_max_pool_fits admits 16-bit types only
    }
  });
}

void batch_norm_relu_max_pool_backward_launch(const BatchNormPlan& plan, DType dtype,
                                              const PoolGeometry& g, const void* dy,
                                              const uint8_t* argmax, const uint8_t* mask,
                                              const void* x, void* dz, void* dx,
                                              const BatchNormGradPointers& bn, float* workspace,
                                              unsigned* counters, gpuStream_t stream) {
  const int64_t rows = g.n * g.h * g.w;
  if (g.c == 0) return;
  const char* op = "batch_norm_relu_max_pool_backward";
  dispatch_float(op, dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      // Also with no rows: writes dweight = dbias = 0.
      batch_norm_pool_grad_sums_kernel<T>
          <<<dim3(unsigned(plan.columns), unsigned(plan.row_blocks)), block_of(plan), 0, stream>>>(
              static_cast<const T*>(dy), argmax, static_cast<const T*>(x), int(g.h), int(g.w),
              int(g.p), int(g.q), rows, g.c, plan.rows_per_block, bn.mean, bn.invstd, bn.dweight,
              bn.dbias, workspace, workspace + plan.row_blocks * g.c, counters, mask,
              static_cast<T*>(dz));
      HG_GPU_CHECK_LAUNCH();
    } else {
      unsupported_dtype(op, dtype);  // batch_norm_relu_max_pool_fits admits 16-bit types only
    }
  });
  batch_norm_input_grad_launch(plan, dtype, dz, x, dx, rows, g.c, bn.weight, bn.mean, bn.invstd,
                               bn.dweight, bn.dbias, stream);
}

}  // namespace hg::gpu
