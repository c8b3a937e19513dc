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
#include <algorithm>

#include "hourglass/backend/gpu/batch_norm_common.cuh"
#include "hourglass/backend/gpu/batch_norm_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {
namespace {

using namespace bn;  // the kernels' shared pieces (batch_norm_common.cuh)

constexpr int kPoolThreads = 256;
constexpr int kVec = 8;          // channels a thread: one 16-byte load of a 16-bit type
constexpr uint8_t kNoArg = 255;  // the u8 arg-max record of a window without inputs

// Flat indices are 32-bit: the launcher checks that the input's elements fit. The grid-stride
// loop's stride is a multiple of the channel vectors a row (batch_norm_relu_max_pool_fits), so
// a thread keeps its channels, and their coefficients, for every output it visits. A window's
// nine loads are issued before any is used.
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
  const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
  const int cv = int(first % vectors);
  float mean[kVec], scale[kVec], shift[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const int c = cv * kVec + i;
    mean[i] = mean_in[c];
    scale[i] = weight[c] * invstd[c];
    shift[i] = bias[c];
  }
  for (unsigned t = first; t < total; t += gridDim.x * blockDim.x) {
    unsigned rest = t / vectors;
    const int oq = int(rest % unsigned(q));
    rest /= unsigned(q);
    const int op = int(rest % unsigned(p));
    const int image = int(rest / unsigned(p));
    const int row0 = 2 * op - 1, col0 = 2 * oq - 1;
    Pack<T, kVec> xs[9];
#pragma unroll
    for (int j = 0; j < 9; ++j) {
      const int row = row0 + j / 3, col = col0 + j % 3;
      if (row >= 0 && row < h && col >= 0 && col < w)
        xs[j] = load_pack<T, kVec>(x + ((image * h + row) * w + col) * channels + cv * kVec);
    }
    float best[kVec];
    uint8_t arg[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      best[i] = -INFINITY;
      arg[i] = kNoArg;
    }
#pragma unroll
    for (int j = 0; j < 9; ++j) {
      const int r = j / 3, s = j % 3, row = row0 + r, col = col0 + s;
      if (row < 0 || row >= h || col < 0 || col >= w) continue;
      unsigned bits = 0;
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        float v = (to_float(xs[j].v[i]) - mean[i]) * scale[i] + shift[i];
        v = v < 0.0f ? 0.0f : v;
        const float z = to_float(from_float<T>(v));
        bits |= unsigned(z > 0.0f) << i;
        if (arg[i] == kNoArg || z > best[i]) {  // the first maximum wins ties
          best[i] = z;
          arg[i] = uint8_t(j);  // r * 3 + s
        }
      }
      if (r >= 1 && s >= 1)
        mask[((image * h + row) * w + col) * (channels / 8) + cv] = uint8_t(bits);
    }
    const int out = ((image * p + op) * q + oq) * channels + cv * kVec;
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
// width, input row h lies in windows h / 2 and, when h is odd, h / 2 + 1 (if it exists). With
// kSum2 the pooled gradient is dy + dy2, each window's sum rounded to T as the add that would
// otherwise run first rounds it.
// Registers: one block a multiprocessor (its loads, up to 13 a row, are what keeps the memory
// busy, not the thread count).
#ifdef HOURGLASS_GPU_HIP
#define HG_BN_POOL_GRAD_BOUNDS __launch_bounds__(kThreads)
#else
#define HG_BN_POOL_GRAD_BOUNDS __launch_bounds__(kThreads, 1)
#endif
template <typename T, bool kSum2>
__global__ void HG_BN_POOL_GRAD_BOUNDS batch_norm_pool_grad_sums_kernel(
    const T* __restrict__ dy, const T* __restrict__ dy2, const uint8_t* __restrict__ argmax,
    const T* __restrict__ x, int h, int w, int p, int q, int64_t rows, int64_t channels,
    int64_t rows_per_block, const float* __restrict__ mean_in, const float* __restrict__ invstd,
    float* dweight, float* dbias, float* part_dy, float* part_dyx, unsigned* counters,
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
      const int p0 = in_row >> 1, q0 = col >> 1;
      // Windows (p0, q0), (p0, q0 + 1), (p0 + 1, q0), (p0 + 1, q0 + 1) in that order; the
      // second row (column) of windows holds this input when its row (column) is odd.
      const bool down = (in_row & 1) != 0 && p0 + 1 < p, right = (col & 1) != 0 && q0 + 1 < q;
      Pack<uint8_t, V> a[4];
      Pack<T, V> d[4], d2[kSum2 ? 4 : 1];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if ((j & 2 ? down : true) && (j & 1 ? right : true)) {
          const int64_t out =
              ((int64_t(image) * p + p0 + j / 2) * q + q0 + j % 2) * channels + vector * V;
          a[j] = *reinterpret_cast<const Pack<uint8_t, V>*>(argmax + out);
          d[j] = load_pack<T, V>(dy + out);
          if constexpr (kSum2) d2[j] = load_pack<T, V>(dy2 + out);
        }
      }
      float acc[V];
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (!((j & 2 ? down : true) && (j & 1 ? right : true))) continue;
        // This input's place in window (p0 + j / 2, q0 + j % 2): row in_row - (2 wp - 1).
        const uint8_t pos =
            uint8_t((in_row - 2 * (p0 + j / 2) + 1) * 3 + (col - 2 * (q0 + j % 2) + 1));
#pragma unroll
        for (int i = 0; i < V; ++i) {
          float v = to_float(d[j].v[i]);
          if constexpr (kSum2) v = to_float(from_float<T>(v + to_float(d2[j].v[i])));
          if (a[j].v[i] == pos) acc[i] += v;
        }
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
         g.c / kVec <= kPoolThreads && kPoolThreads % (g.c / kVec) == 0 &&
         g.n * g.h * g.w * g.c < (int64_t(1) << 31);
}

void batch_norm_relu_max_pool_train_launch(const BatchNormPlan& plan, DType dtype,
                                           const PoolGeometry& g, const void* x, void* y,
                                           uint8_t* argmax, uint8_t* mask,
                                           const BatchNormTrainPointers& bn, double momentum,
                                           double eps, float* workspace, gpuStream_t stream) {
  const int64_t rows = g.n * g.h * g.w;
  if (rows == 0 || g.c == 0) return;
  const char* op = "batch_norm_relu_max_pool_train";
  dispatch_float(op, dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      const T* xt = static_cast<const T*>(x);
      launch_batch_norm_stats<T, kVec>(plan, xt, rows, g.c, bn.running_mean, bn.running_var,
                                       momentum, eps, bn.save_mean, bn.save_invstd, workspace,
                                       stream);
      // About one wave of blocks (the statistics grid is two 512-thread blocks a
      // multiprocessor), each thread visiting many outputs with the same channels.
      const int64_t total = g.n * g.p * g.q * (g.c / kVec);
      const unsigned blocks = std::min<unsigned>(grid_for(total, kPoolThreads),
                                                 unsigned(4 * plan.columns * plan.row_blocks));
      batch_norm_relu_max_pool_kernel<T><<<blocks, kPoolThreads, 0, stream>>>(
          xt, static_cast<T*>(y), argmax, mask, int(g.h), int(g.w), int(g.c), int(g.p), int(g.q),
          unsigned(total), bn.weight, bn.bias, bn.save_mean, bn.save_invstd);
      HG_GPU_CHECK_LAUNCH();
    } else {
      unsupported_dtype(op, dtype);  // batch_norm_relu_max_pool_fits admits 16-bit types only
    }
  });
}

void batch_norm_relu_max_pool_backward_launch(
    const BatchNormPlan& plan, DType dtype, const PoolGeometry& g, const void* dy, const void* dy2,
    const uint8_t* argmax, const uint8_t* mask, const void* x, void* dz, void* dx,
    const BatchNormGradPointers& bn, float* workspace, unsigned* counters, gpuStream_t stream) {
  const int64_t rows = g.n * g.h * g.w;
  if (g.c == 0) return;
  const char* op = "batch_norm_relu_max_pool_backward";
  dispatch_float(op, dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      const dim3 grid(unsigned(plan.columns), unsigned(plan.row_blocks));
      auto sums = [&]<bool kSum2>() {
        // Also with no rows: writes dweight = dbias = 0.
        batch_norm_pool_grad_sums_kernel<T, kSum2><<<grid, block_of(plan), 0, stream>>>(
            static_cast<const T*>(dy), static_cast<const T*>(dy2), argmax, static_cast<const T*>(x),
            int(g.h), int(g.w), int(g.p), int(g.q), rows, g.c, plan.rows_per_block, bn.mean,
            bn.invstd, bn.dweight, bn.dbias, workspace, workspace + plan.row_blocks * g.c, counters,
            mask, static_cast<T*>(dz));
        HG_GPU_CHECK_LAUNCH();
      };
      if (dy2 != nullptr)
        sums.template operator()<true>();
      else
        sums.template operator()<false>();
    } else {
      unsupported_dtype(op, dtype);  // batch_norm_relu_max_pool_fits admits 16-bit types only
    }
  });
  batch_norm_input_grad_launch(plan, dtype, dz, x, dx, rows, g.c, bn.weight, bn.mean, bn.invstd,
                               bn.dweight, bn.dbias, stream);
}

}  // namespace hg::gpu
