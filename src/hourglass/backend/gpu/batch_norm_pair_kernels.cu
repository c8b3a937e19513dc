// A pair of batch norms summed, then a ReLU, y = relu(bn(x) + bn(x2)): a downsampling residual
// block's last batch norm and its shortcut's. Apart, the shortcut's batch norm writes its
// output, the main path's fused pass reads it back as the residual and its backward writes
// the residual's gradient for the shortcut's backward to read twice. Together, the normalising
// pass reads x and x2 and writes y; the backward's sums pass reads the gradient, x and x2 once
// and stores the masked gradient dz; its dx pass reads dz, x and x2 and writes dx and dx2: two
// passes over the tensor fewer each way.
//
// The same grid, plans and reductions as batch_norm_kernels.cu (batch_norm_common.cuh): the
// statistics are its statistics kernel run on x, then on x2; the backward's sums pass reduces
// (dz, dz * (x - mean)) and then (dz, dz * (x2 - mean2)) with the same column reduction, the
// second on its own partials and counters. Same inputs and plan, same bits.
#include <utility>

#include "hourglass/backend/gpu/batch_norm_common.cuh"
#include "hourglass/backend/gpu/batch_norm_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {
namespace {

using namespace bn;  // the kernels' shared pieces (batch_norm_common.cuh)

// y = relu((x - mean) * scale + shift + (x2 - mean2) * scale2 + shift2), scale = weight *
// invstd, in f32 and rounded once; each normalised term as batch_norm_normalize_kernel computes
// it, the second added to the first. With kMaskOut (V = 8) also y's ReLU mask byte per row.
// Rows are walked backwards, as there, starting on what the statistics left in L2.
template <typename T, int V, bool kMaskOut>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_pair_normalize_kernel(
    const T* __restrict__ x, const T* __restrict__ x2, T* __restrict__ y, int64_t rows,
    int64_t channels, int64_t rows_per_block, BatchNormTrainPointers first,
    BatchNormTrainPointers second, uint8_t* __restrict__ mask, int64_t mask_stride) {
  static_assert(!kMaskOut || V == 8, "one mask byte per thread and row");
  constexpr int kRows = kRowsPerStep<T, V, 2>;
  alignas(16) __shared__ float s_coef[6][kCoefWidth];
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  if (t < width) {
    const int64_t c = int64_t(blockIdx.x) * width + t;
    const bool in = c < channels;
    s_coef[0][t] = in ? first.save_mean[c] : 0.0f;
    s_coef[1][t] = in ? first.weight[c] * first.save_invstd[c] : 0.0f;
    s_coef[2][t] = in ? first.bias[c] : 0.0f;
    s_coef[3][t] = in ? second.save_mean[c] : 0.0f;
    s_coef[4][t] = in ? second.weight[c] * second.save_invstd[c] : 0.0f;
    s_coef[5][t] = in ? second.bias[c] : 0.0f;
  }
  __syncthreads();
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector * V >= channels) return;
  const int64_t first_row = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first_row);
  const int e = int(threadIdx.x) * V;
  const int64_t step = int64_t(by) * channels;
  for (int64_t j = steps_of(len, ty, by * kRows) - 1; j >= 0; --j) {
    const int64_t o = ty + j * by * kRows;
    const int64_t offset = (first_row + o) * channels + vector * V;
    Pack<T, V> xs[kRows], x2s[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        xs[k] = load_pack<T, V>(x + offset + k * step);
        x2s[k] = load_pack<T, V>(x2 + offset + k * step);
      }
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        float mean[V], scale[V], shift[V], mean2[V], scale2[V], shift2[V];
        load_shared<V>(&s_coef[0][e], mean);
        load_shared<V>(&s_coef[1][e], scale);
        load_shared<V>(&s_coef[2][e], shift);
        load_shared<V>(&s_coef[3][e], mean2);
        load_shared<V>(&s_coef[4][e], scale2);
        load_shared<V>(&s_coef[5][e], shift2);
        Pack<T, V> out;
        unsigned bits = 0;
#pragma unroll
        for (int i = 0; i < V; ++i) {
          float v = (to_float(xs[k].v[i]) - mean[i]) * scale[i] + shift[i];
          v += (to_float(x2s[k].v[i]) - mean2[i]) * scale2[i] + shift2[i];
          v = v < 0.0f ? 0.0f : v;  // as ops::relu: a NaN passes through
          out.v[i] = from_float<T>(v);
          if constexpr (kMaskOut) bits |= unsigned(to_float(out.v[i]) > 0.0f) << i;
        }
        *reinterpret_cast<Pack<T, V>*>(y + offset + k * step) = out;
        if constexpr (kMaskOut)
          mask[(first_row + o + k * by) * mask_stride + vector] = uint8_t(bits);
      }
    }
  }
}

// dz = (dy [+ dy2]) masked by y > 0, stored, and per channel sum dz, sum dz * (x - mean) and
// sum dz * (x2 - mean2): the last block of each column of the first reduction writes dbias,
// dweight, of the second dbias2, dweight2 (the same sum dz, reduced the same way). With kSum2
// the two parts of the gradient are summed and rounded to T first, as
// batch_norm_grad_sums_kernel sums them.
template <typename T, int V, bool kSum2>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_pair_grad_sums_kernel(
    const T* __restrict__ dy, const T* __restrict__ dy2, const uint8_t* __restrict__ mask,
    int64_t mask_stride, const T* __restrict__ x, const T* __restrict__ x2, T* __restrict__ dz,
    int64_t rows, int64_t channels, int64_t rows_per_block, BatchNormGradPointers first,
    BatchNormGradPointers second, float* part_a, float* part_b, float* part_c, float* part_d,
    unsigned* counters) {
  constexpr int kInputs = 3 + (kSum2 ? 1 : 0);  // the mask's byte a row is not counted
  constexpr int kRows = kRowsPerStep<T, V, kInputs>;
  __shared__ float s_a[kThreads * V];
  __shared__ float s_b[kThreads * V];
  alignas(16) __shared__ float s_mean[2][kCoefWidth];
  __shared__ unsigned s_ticket;
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int64_t column = blockIdx.x;
  if (t < width) {
    const int64_t c = column * width + t;
    s_mean[0][t] = c < channels ? first.mean[c] : 0.0f;
    s_mean[1][t] = c < channels ? second.mean[c] : 0.0f;
  }
  __syncthreads();
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = column * blockDim.x + threadIdx.x;
  const int64_t first_row = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first_row);

  float sum_dz[V], sum_dzx[V], sum_dzx2[V];
#pragma unroll
  for (int i = 0; i < V; ++i) sum_dz[i] = sum_dzx[i] = sum_dzx2[i] = 0.0f;
  if (vector * V < channels) {
    const int e = int(threadIdx.x) * V;
    const int64_t step = int64_t(by) * channels;
    for (int64_t o = ty; o < len; o += by * kRows) {
      const int64_t offset = (first_row + o) * channels + vector * V;
      Pack<T, V> gs[kRows], g2s[kSum2 ? kRows : 1], xs[kRows], x2s[kRows];
      unsigned ms[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          gs[k] = load_pack<T, V>(dy + offset + k * step);
          if constexpr (kSum2) g2s[k] = load_pack<T, V>(dy2 + offset + k * step);
          xs[k] = load_pack<T, V>(x + offset + k * step);
          x2s[k] = load_pack<T, V>(x2 + offset + k * step);
          ms[k] = mask_bits<V>(mask + (first_row + o + k * by) * mask_stride, vector);
        }
      }
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          float mean[V], mean2[V], g[V];
          load_shared<V>(&s_mean[0][e], mean);
          load_shared<V>(&s_mean[1][e], mean2);
#pragma unroll
          for (int i = 0; i < V; ++i) {
            g[i] = to_float(gs[k].v[i]);
            if constexpr (kSum2) g[i] = to_float(from_float<T>(g[i] + to_float(g2s[k].v[i])));
            g[i] = (ms[k] >> i) & 1u ? g[i] : 0.0f;
            sum_dz[i] += g[i];
            sum_dzx[i] += g[i] * (to_float(xs[k].v[i]) - mean[i]);
            sum_dzx2[i] += g[i] * (to_float(x2s[k].v[i]) - mean2[i]);
          }
          store_row<T, V>(dz + offset + k * step, g);
        }
      }
    }
  }
  const int e = ty * int(blockDim.x) * V + int(threadIdx.x) * V;
  const int64_t c = column * width + t;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    s_a[e + i] = sum_dz[i];
    s_b[e + i] = sum_dzx[i];
  }
  if (reduce_column<V>(s_a, s_b, &s_ticket, SumMerge{}, rows, channels, rows_per_block, part_a,
                       part_b, counters) &&
      t < width && c < channels) {
    first.dbias[c] = s_a[t];
    first.dweight[c] = first.invstd[c] * s_b[t];
  }
  __syncthreads();  // the finishing block has read s_a and s_b
#pragma unroll
  for (int i = 0; i < V; ++i) {
    s_a[e + i] = sum_dz[i];
    s_b[e + i] = sum_dzx2[i];
  }
  if (!reduce_column<V>(s_a, s_b, &s_ticket, SumMerge{}, rows, channels, rows_per_block, part_c,
                        part_d, counters + gridDim.x))
    return;
  if (t < width && c < channels) {
    second.dbias[c] = s_a[t];
    second.dweight[c] = second.invstd[c] * s_b[t];
  }
}

// The input-gradient coefficients of channel c for one batch norm of the pair, as
// batch_norm_input_grad_kernel computes them, to slots [0, 4) of `coef`.
__device__ inline void input_grad_coefficients(const BatchNormGradPointers& p, int64_t c,
                                               int64_t channels, int64_t rows, int t,
                                               float (*coef)[kCoefWidth]) {
  float a = 0.0f, k = 0.0f, d = 0.0f, mean = 0.0f;
  if (c < channels) {
    const float inv_count = 1.0f / float(rows);
    const float inv = p.invstd[c];
    a = p.weight[c] * inv;
    k = a * inv * (p.dweight[c] * inv_count);
    d = -a * (p.dbias[c] * inv_count);
    mean = p.mean[c];
  }
  coef[0][t] = a;
  coef[1][t] = k;
  coef[2][t] = d;
  coef[3][t] = mean;
}

// One row of one input's gradient: a * dz - k * (in - mean) + d with `coef`'s coefficients.
template <typename T, int V>
__device__ inline void store_input_grad(T* out, const Pack<T, V>& dz, const Pack<T, V>& in,
                                        const float (*coef)[kCoefWidth], int e) {
  float a[V], kx[V], d[V], mean[V], v[V];
  load_shared<V>(&coef[0][e], a);
  load_shared<V>(&coef[1][e], kx);
  load_shared<V>(&coef[2][e], d);
  load_shared<V>(&coef[3][e], mean);
#pragma unroll
  for (int i = 0; i < V; ++i)
    v[i] = a[i] * to_float(dz.v[i]) - kx[i] * (to_float(in.v[i]) - mean[i]) + d[i];
  store_row<T, V>(out, v);
}

// dx = a * dz - k * (x - mean) + d and dx2 likewise with x2's coefficients, each as
// batch_norm_input_grad_kernel computes it from dz.
template <typename T, int V>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_pair_input_grad_kernel(
    const T* __restrict__ dz, const T* __restrict__ x, const T* __restrict__ x2, T* __restrict__ dx,
    T* __restrict__ dx2, int64_t rows, int64_t channels, int64_t rows_per_block,
    BatchNormGradPointers first, BatchNormGradPointers second) {
  constexpr int kRows = kRowsPerStep<T, V, 3>;
  alignas(16) __shared__ float s_coef[8][kCoefWidth];
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  if (t < width) {
    const int64_t c = int64_t(blockIdx.x) * width + t;
    input_grad_coefficients(first, c, channels, rows, t, &s_coef[0]);
    input_grad_coefficients(second, c, channels, rows, t, &s_coef[4]);
  }
  __syncthreads();
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector * V >= channels) return;
  const int64_t first_row = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first_row);
  const int e = int(threadIdx.x) * V;
  const int64_t step = int64_t(by) * channels;
  for (int64_t j = steps_of(len, ty, by * kRows) - 1; j >= 0; --j) {
    const int64_t o = ty + j * by * kRows;
    const int64_t offset = (first_row + o) * channels + vector * V;
    Pack<T, V> gs[kRows], xs[kRows], x2s[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        gs[k] = load_pack<T, V>(dz + offset + k * step);
        xs[k] = load_pack<T, V>(x + offset + k * step);
        x2s[k] = load_pack<T, V>(x2 + offset + k * step);
      }
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        store_input_grad<T, V>(dx + offset + k * step, gs[k], xs[k], &s_coef[0], e);
        store_input_grad<T, V>(dx2 + offset + k * step, gs[k], x2s[k], &s_coef[4], e);
      }
    }
  }
}

}  // namespace

int64_t batch_norm_pair_workspace_floats(const BatchNormPlan& plan, int64_t channels) {
  return 2 * batch_norm_workspace_floats(plan, channels);
}

int64_t batch_norm_pair_counters(const BatchNormPlan& plan) { return 2 * plan.columns; }

void batch_norm_pair_relu_train_launch(const BatchNormPlan& plan, DType dtype, const void* x,
                                       const void* x2, void* y, uint8_t* mask, int64_t rows,
                                       int64_t channels, const BatchNormTrainPointers& first,
                                       const BatchNormTrainPointers& second, double momentum,
                                       double eps, float* workspace, gpuStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const char* op = "batch_norm_pair_relu_train";
  const dim3 grid(unsigned(plan.columns), unsigned(plan.row_blocks));
  dispatch_float(op, dtype, [&]<typename T>() {
    dispatch_vec<T>(op, dtype, plan.vec, [&]<int V>() {
      const T* xt = static_cast<const T*>(x);
      const T* x2t = static_cast<const T*>(x2);
      // The two statistics passes run one after the other on the stream: they share the
      // workspace.
      for (const auto& [in, p] : {std::pair{xt, &first}, std::pair{x2t, &second}}) {
        launch_batch_norm_stats<T, V>(plan, in, rows, channels, p->running_mean, p->running_var,
                                      momentum, eps, p->save_mean, p->save_invstd, workspace,
                                      stream);
      }
      const int64_t ms = relu_mask_stride(channels);
      if constexpr (V == 8) {
        batch_norm_pair_normalize_kernel<T, V, true>
            <<<grid, block_of(plan), 0, stream>>>(xt, x2t, static_cast<T*>(y), rows, channels,
                                                  plan.rows_per_block, first, second, mask, ms);
        HG_GPU_CHECK_LAUNCH();
      } else {
        batch_norm_pair_normalize_kernel<T, V, false>
            <<<grid, block_of(plan), 0, stream>>>(xt, x2t, static_cast<T*>(y), rows, channels,
                                                  plan.rows_per_block, first, second, nullptr, ms);
        HG_GPU_CHECK_LAUNCH();
        relu_mask_launch(dtype, y, mask, rows, channels, stream);
      }
    });
  });
}

void batch_norm_pair_relu_backward_launch(const BatchNormPlan& plan, DType dtype, const void* dy,
                                          const void* dy2, const uint8_t* mask, const void* x,
                                          const void* x2, void* dz, void* dx, void* dx2,
                                          int64_t rows, int64_t channels,
                                          const BatchNormGradPointers& first,
                                          const BatchNormGradPointers& second, float* workspace,
                                          unsigned* counters, gpuStream_t stream) {
  if (channels == 0) return;
  const char* op = "batch_norm_pair_relu_backward";
  const dim3 grid(unsigned(plan.columns), unsigned(plan.row_blocks));
  const int64_t partial = plan.row_blocks * channels;
  dispatch_float(op, dtype, [&]<typename T>() {
    dispatch_vec<T>(op, dtype, plan.vec, [&]<int V>() {
      const T* gt = static_cast<const T*>(dy);
      const T* xt = static_cast<const T*>(x);
      const T* x2t = static_cast<const T*>(x2);
      T* dzt = static_cast<T*>(dz);
      const int64_t ms = relu_mask_stride(channels);
      // Also with no rows: writes the parameter gradients, zero.
      if (dy2 != nullptr)
        batch_norm_pair_grad_sums_kernel<T, V, true><<<grid, block_of(plan), 0, stream>>>(
            gt, static_cast<const T*>(dy2), mask, ms, xt, x2t, dzt, rows, channels,
            plan.rows_per_block, first, second, workspace, workspace + partial,
            workspace + 2 * partial, workspace + 3 * partial, counters);
      else
        batch_norm_pair_grad_sums_kernel<T, V, false><<<grid, block_of(plan), 0, stream>>>(
            gt, nullptr, mask, ms, xt, x2t, dzt, rows, channels, plan.rows_per_block, first, second,
            workspace, workspace + partial, workspace + 2 * partial, workspace + 3 * partial,
            counters);
      HG_GPU_CHECK_LAUNCH();
      if (rows == 0) return;
      batch_norm_pair_input_grad_kernel<T, V><<<grid, block_of(plan), 0, stream>>>(
          dzt, xt, x2t, static_cast<T*>(dx), static_cast<T*>(dx2), rows, channels,
          plan.rows_per_block, first, second);
      HG_GPU_CHECK_LAUNCH();
    });
  });
}

}  // namespace hg::gpu
