// Batch-norm kernels over channels-last inputs viewed as [rows, channels] (see
// batch_norm_kernels.h for the scheme).
//
// Accuracy: statistics are per-thread sums of x minus one of the thread's own values (whose
// E[d^2] - E[d]^2 cancels at most by the thread's row count, so an input with mean 100 and
// spread 0.1 keeps its variance, and its mean is found to the spread's precision), turned into
// (mean, M2) and merged with Chan's formula in the block and across blocks; the backward sums dy
// and dy * (x - mean) directly, so no large terms cancel there either. Counts used by the merges
// are computed from the plan, not carried. All merges run in a fixed order: same inputs and plan,
// same bits.
#include "hourglass/backend/gpu/batch_norm_kernels.h"

#include <algorithm>

#include "hourglass/backend/gpu/batch_norm_common.cuh"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {
namespace {

using namespace bn;  // the kernels' shared pieces (batch_norm_common.cuh)

// y = (x - mean) * scale + shift with per-channel coefficients computed once per block into
// shared memory (kCoefWidth): training passes the saved (mean, invstd), eval the running (mean,
// var) and eps. The fused training forward (batch_norm_relu) adds the residual (kResidual) and
// applies the ReLU (kRelu) in f32 before the one rounding to T; the ReLU is `v < 0 ? 0 : v` as
// ops::relu's, so a NaN passes through. The elementwise passes use the reductions' partition of the
// rows but walk each block's rows backwards: the reduction that just read the same rows forwards
// left their ends in L2, so the pass starts on what is still cached (for the smaller layers, all of
// it). With kMaskOut (kRelu and V = 8 only: a thread's channels are one byte of the mask) it also
// stores the ReLU mask, bit i of mask[row * mask_stride + c / 8] set where y[row, c] > 0 as
// rounded to T (see batch_norm_relu_train_launch).
template <typename T, int V, bool kFromVariance, bool kResidual = false, bool kRelu = false,
          bool kMaskOut = false>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_normalize_kernel(
    const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t channels,
    int64_t rows_per_block, const float* __restrict__ weight, const float* __restrict__ bias,
    const float* __restrict__ mean_in, const float* __restrict__ spread, double eps,
    const T* __restrict__ residual = nullptr, uint8_t* __restrict__ mask = nullptr,
    int64_t mask_stride = 0) {
  static_assert(!kMaskOut || (kRelu && V == 8), "one mask byte per thread and row");
  constexpr int kInputs = kResidual ? 2 : 1;
  constexpr int kRows = kRowsPerStep<T, V, kInputs>;
  alignas(16) __shared__ float s_coef[3][kCoefWidth];
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  if (t < width) {
    const int64_t c = int64_t(blockIdx.x) * width + t;
    const bool in = c < channels;
    s_coef[0][t] = in ? mean_in[c] : 0.0f;
    s_coef[1][t] = !in             ? 0.0f
                   : kFromVariance ? float(double(weight[c]) / sqrt(double(spread[c]) + eps))
                                   : weight[c] * spread[c];
    s_coef[2][t] = in ? bias[c] : 0.0f;
  }
  __syncthreads();
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector * V >= channels) return;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  const int e = int(threadIdx.x) * V;
  const int64_t step = int64_t(by) * channels;
  for (int64_t j = steps_of(len, ty, by * kRows) - 1; j >= 0; --j) {
    const int64_t o = ty + j * by * kRows;
    const int64_t offset = (first + o) * channels + vector * V;
    const T* px = x + offset;
    T* py = y + offset;
    Pack<T, V> xs[kRows], rs[kResidual ? kRows : 1];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        xs[k] = load_pack<T, V>(px + k * step);
        if constexpr (kResidual) rs[k] = load_pack<T, V>(residual + offset + k * step);
      }
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        float mean[V], scale[V], shift[V];
        load_shared<V>(&s_coef[0][e], mean);
        load_shared<V>(&s_coef[1][e], scale);
        load_shared<V>(&s_coef[2][e], shift);
        Pack<T, V> out;
        unsigned bits = 0;
#pragma unroll
        for (int i = 0; i < V; ++i) {
          float v = (to_float(xs[k].v[i]) - mean[i]) * scale[i] + shift[i];
          if constexpr (kResidual) v += to_float(rs[k].v[i]);
          if constexpr (kRelu) v = v < 0.0f ? 0.0f : v;
          out.v[i] = from_float<T>(v);
          if constexpr (kMaskOut) bits |= unsigned(to_float(out.v[i]) > 0.0f) << i;
        }
        *reinterpret_cast<Pack<T, V>*>(py + k * step) = out;
        if constexpr (kMaskOut) mask[(first + o + k * by) * mask_stride + vector] = uint8_t(bits);
      }
    }
  }
}

// Per-channel sum dy and sum dy * (x - mean); the last block of each column writes
// dbias = sum dy and dweight = invstd * sum dy * (x - mean). With kMask (the fused
// batch_norm_relu backward) dy is replaced on the fly by dz = (y > 0 ? dy : 0), y the fused
// forward's output, as relu_backward would have computed it, read from its ReLU mask (one bit
// per value: 1/16 of the bytes of y in bf16); with kStoreDz that dz is also
// stored (to the residual's gradient, which it is: exactly dy or 0, so the store rounds
// nothing), and the input-gradient pass then reads dz alone instead of dy and y again. With
// kSum2 the output's gradient arrives in two parts, dy + dy2 (a value used twice in the forward
// pass: a residual block's output feeds the next block and its shortcut); their sum is rounded
// to T before anything else, as the add that would otherwise have been run first rounds it.
template <typename T, int V, bool kMask = false, bool kStoreDz = false, bool kSum2 = false>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_grad_sums_kernel(
    const T* __restrict__ dy, const T* __restrict__ x, int64_t rows, int64_t channels,
    int64_t rows_per_block, const float* __restrict__ mean_in, const float* __restrict__ invstd,
    float* dweight, float* dbias, float* part_dy, float* part_dyx, unsigned* counters,
    const uint8_t* __restrict__ mask = nullptr, int64_t mask_stride = 0,
    T* __restrict__ dz = nullptr, const T* __restrict__ dy2 = nullptr) {
  static_assert(kMask || !kStoreDz, "dz is the masked dy");
  static_assert(kStoreDz || !kSum2, "the summed gradient is stored for the dx pass");
  constexpr int kInputs = 2 + (kSum2 ? 1 : 0);  // the mask's byte a row is not counted
  constexpr int kRows = kRowsPerStep<T, V, kInputs>;
  __shared__ float s_dy[kThreads * V];
  __shared__ float s_dyx[kThreads * V];
  __shared__ unsigned s_ticket;
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);

  alignas(16) __shared__ float s_mean[kCoefWidth];  // read per row (see kCoefWidth)
  {
    const int width = int(blockDim.x) * V;
    const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
    const int64_t c = int64_t(blockIdx.x) * width + t;
    if (t < width) s_mean[t] = c < channels ? mean_in[c] : 0.0f;
  }
  __syncthreads();
  float sum_dy[V], sum_dyx[V];
#pragma unroll
  for (int i = 0; i < V; ++i) sum_dy[i] = sum_dyx[i] = 0.0f;
  if (vector * V < channels) {
    const int e = int(threadIdx.x) * V;
    const int64_t step = int64_t(by) * channels;
    const int64_t offset = (first + ty) * channels + vector * V;
    const T* pg = dy + offset;
    const T* px = x + offset;
    const uint8_t* pm = kMask ? mask + (first + ty) * mask_stride : nullptr;
    const int64_t mask_step = int64_t(by) * mask_stride;
    const T* pg2 = kSum2 ? dy2 + offset : nullptr;
    for (int64_t o = ty; o < len; o += by * kRows, pg += kRows * step, px += kRows * step,
                 pm += kMask ? kRows * mask_step : 0, pg2 += kSum2 ? kRows * step : 0) {
      Pack<T, V> gs[kRows], xs[kRows], g2s[kSum2 ? kRows : 1];
      unsigned ms[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          gs[k] = load_pack<T, V>(pg + k * step);
          xs[k] = load_pack<T, V>(px + k * step);
          if constexpr (kMask) ms[k] = mask_bits<V>(pm + k * mask_step, vector);
          if constexpr (kSum2) g2s[k] = load_pack<T, V>(pg2 + k * step);
        }
      }
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          float g[V], mean[V];
          load_shared<V>(&s_mean[e], mean);
#pragma unroll
          for (int i = 0; i < V; ++i) {
            g[i] = to_float(gs[k].v[i]);
            if constexpr (kSum2) g[i] = to_float(from_float<T>(g[i] + to_float(g2s[k].v[i])));
            if constexpr (kMask) g[i] = (ms[k] >> i) & 1u ? g[i] : 0.0f;
            sum_dy[i] += g[i];
            sum_dyx[i] += g[i] * (to_float(xs[k].v[i]) - mean[i]);
          }
          if constexpr (kStoreDz) store_row<T, V>(dz + (pg - dy) + k * step, g);
        }
      }
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

// dx = a * dy - k * (x - mean) + d with a = weight * invstd, k = a * invstd * dweight / M,
// d = -a * dbias / M (the CPU backend's form). With kMask, dy is masked by y > 0 on the fly as
// in the gradient sums (from the ReLU mask's bits).
template <typename T, int V, bool kMask = false>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_input_grad_kernel(
    const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx, int64_t rows,
    int64_t channels, int64_t rows_per_block, const float* __restrict__ weight,
    const float* __restrict__ mean_in, const float* __restrict__ invstd,
    const float* __restrict__ dweight, const float* __restrict__ dbias,
    const uint8_t* __restrict__ mask = nullptr, int64_t mask_stride = 0) {
  constexpr int kInputs = 2;  // the mask's byte a row is not counted
  constexpr int kRows = kRowsPerStep<T, V, kInputs>;
  // The coefficients of the block's channels live in shared memory (read per row, a broadcast
  // across the threads of one channel vector): in registers they would cost 4 * V of them.
  alignas(16) __shared__ float s_coef[4][kMaxBlockX * 8];
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  if (t < width) {
    const int64_t c = int64_t(blockIdx.x) * width + t;
    float a = 0.0f, k = 0.0f, d = 0.0f, mean = 0.0f;
    if (c < channels) {
      const float inv_count = 1.0f / float(rows);
      const float inv = invstd[c];
      a = weight[c] * inv;
      k = a * inv * (dweight[c] * inv_count);
      d = -a * (dbias[c] * inv_count);
      mean = mean_in[c];
    }
    s_coef[0][t] = a;
    s_coef[1][t] = k;
    s_coef[2][t] = d;
    s_coef[3][t] = mean;
  }
  __syncthreads();
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector * V >= channels) return;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  const int e = int(threadIdx.x) * V;
  const int64_t step = int64_t(by) * channels;
  for (int64_t j = steps_of(len, ty, by * kRows) - 1; j >= 0; --j) {
    const int64_t o = ty + j * by * kRows;
    const int64_t offset = (first + o) * channels + vector * V;
    const T* pg = dy + offset;
    const T* px = x + offset;
    T* pd = dx + offset;
    Pack<T, V> gs[kRows], xs[kRows];
    unsigned ms[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        gs[k] = load_pack<T, V>(pg + k * step);
        xs[k] = load_pack<T, V>(px + k * step);
        if constexpr (kMask)
          ms[k] = mask_bits<V>(mask + (first + o + k * by) * mask_stride, vector);
      }
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        float a[V], kx[V], d[V], mean[V], out[V], g[V];
        load_shared<V>(&s_coef[0][e], a);
        load_shared<V>(&s_coef[1][e], kx);
        load_shared<V>(&s_coef[2][e], d);
        load_shared<V>(&s_coef[3][e], mean);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          g[i] = to_float(gs[k].v[i]);
          if constexpr (kMask) g[i] = (ms[k] >> i) & 1u ? g[i] : 0.0f;
          out[i] = a[i] * g[i] - kx[i] * (to_float(xs[k].v[i]) - mean[i]) + d[i];
        }
        store_row<T, V>(pd + k * step, out);
      }
    }
  }
}

// The ReLU mask of y ([rows, channels]) read from y itself, one mask byte per thread: for the
// plans whose threads own fewer than 8 channels (f32, channel counts that are not multiples of
// 8), which cannot store whole bytes from the normalising pass, and for a backward given y.
template <typename T>
__global__ void relu_mask_kernel(const T* __restrict__ y, uint8_t* __restrict__ mask, int64_t rows,
                                 int64_t channels, int64_t mask_stride) {
  const int64_t total = rows * mask_stride;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = e / mask_stride, c0 = (e % mask_stride) * 8;
    const T* p = y + row * channels + c0;
    const int n = int(min64(8, channels - c0));
    unsigned bits = 0;
    for (int i = 0; i < n; ++i) bits |= unsigned(to_float(p[i]) > 0.0f) << i;
    mask[e] = uint8_t(bits);
  }
}

// ---- host side

// Blocks across rows (and rows each) for a grid of `columns` columns aiming at
// `blocks_per_sm` blocks a multiprocessor, each with at least one full step of rows.
void cover_rows(int64_t rows, int64_t rows_per_step, int64_t columns, int64_t sm_count,
                int64_t blocks_per_sm, int64_t& blocks, int64_t& rows_per_block) {
  int64_t want = std::min(ceil_div(rows, rows_per_step),
                          std::max<int64_t>(1, blocks_per_sm * sm_count / columns));
  want = std::min(std::max<int64_t>(want, 1), kMaxGridY);
  rows_per_block = std::max<int64_t>(1, ceil_div(rows, want));
  blocks = std::max<int64_t>(1, ceil_div(rows, rows_per_block));
}

}  // namespace

BatchNormPlan batch_norm_plan(int64_t rows, int64_t channels, DType dtype, uint64_t address_bits,
                              int sm_count) {
  BatchNormPlan p;
  const int64_t size = int64_t(dtype_size(dtype));
  int vec = int(std::min<int64_t>(8, 16 / size));  // 16-byte loads: 4 f32 or 8 bf16/f16
  while (vec > 1 && (channels % vec != 0 || address_bits % uint64_t(vec * size) != 0)) vec /= 2;
  p.vec = vec;
  const int64_t vectors = channels / vec;
  int bx = 1;
  while (bx < vectors && bx < kMaxBlockX) bx *= 2;
  p.block_x = bx;
  p.block_y = kThreads / bx;
  p.columns = std::max<int64_t>(1, ceil_div(vectors, bx));
  const int64_t rows_per_step = int64_t(p.block_y) * kMinRowsPerThread;
  const int64_t sms = std::max(1, sm_count);
  cover_rows(rows, rows_per_step, p.columns, sms, kBlocksPerSm, p.row_blocks, p.rows_per_block);
  return p;
}

int64_t batch_norm_workspace_floats(const BatchNormPlan& plan, int64_t channels) {
  return 2 * plan.row_blocks * channels;
}

namespace {

template <typename T>
void relu_mask_typed(const T* y, uint8_t* mask, int64_t rows, int64_t channels,
                     gpuStream_t stream) {
  const int64_t total = rows * relu_mask_stride(channels);
  if (total == 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(total, threads), 65535);
  relu_mask_kernel<T><<<unsigned(blocks), threads, 0, stream>>>(y, mask, rows, channels,
                                                                relu_mask_stride(channels));
  HG_GPU_CHECK_LAUNCH();
}

// The training forward: statistics, then the normalising pass, which with kFused also adds
// `residual` (when not null), applies the ReLU and stores the ReLU mask.
template <bool kFused>
void train_launch(const char* op, const BatchNormPlan& plan, DType dtype, const void* x,
                  const void* residual, void* y, uint8_t* mask, int64_t rows, int64_t channels,
                  const float* weight, const float* bias, float* running_mean, float* running_var,
                  double momentum, double eps, float* save_mean, float* save_invstd,
                  float* workspace, gpuStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const dim3 grid(unsigned(plan.columns), unsigned(plan.row_blocks));
  dispatch_float(op, dtype, [&]<typename T>() {
    dispatch_vec<T>(op, dtype, plan.vec, [&]<int V>() {
      const T* xt = static_cast<const T*>(x);
      const T* rt = static_cast<const T*>(residual);
      T* yt = static_cast<T*>(y);
      launch_batch_norm_stats<T, V>(plan, xt, rows, channels, running_mean, running_var, momentum,
                                    eps, save_mean, save_invstd, workspace, stream);
      // The mask comes out of the normalising pass when a thread's channels make whole bytes.
      constexpr bool kMaskOut = kFused && V == 8;
      const int64_t ms = relu_mask_stride(channels);
      if (!kFused) {
        batch_norm_normalize_kernel<T, V, false><<<grid, block_of(plan), 0, stream>>>(
            xt, yt, rows, channels, plan.rows_per_block, weight, bias, save_mean, save_invstd, eps);
      } else if (rt == nullptr) {
        batch_norm_normalize_kernel<T, V, false, false, true, kMaskOut>
            <<<grid, block_of(plan), 0, stream>>>(xt, yt, rows, channels, plan.rows_per_block,
                                                  weight, bias, save_mean, save_invstd, eps,
                                                  nullptr, mask, ms);
      } else {
        batch_norm_normalize_kernel<T, V, false, true, true, kMaskOut>
            <<<grid, block_of(plan), 0, stream>>>(xt, yt, rows, channels, plan.rows_per_block,
                                                  weight, bias, save_mean, save_invstd, eps, rt,
                                                  mask, ms);
      }
      HG_GPU_CHECK_LAUNCH();
      if (kFused && !kMaskOut) relu_mask_typed<T>(yt, mask, rows, channels, stream);
    });
  });
}

// The backward: gradient sums, then the input gradient. With kFused dy is masked by the ReLU
// mask in both passes and the input-gradient pass also writes dresidual (when not null).
template <bool kFused>
void backward_launch(const char* op, const BatchNormPlan& plan, DType dtype, const void* dy,
                     const void* dy2, const uint8_t* mask, const void* x, void* dx, void* dresidual,
                     int64_t rows, int64_t channels, const float* weight, const float* mean,
                     const float* invstd, float* dweight, float* dbias, float* workspace,
                     unsigned* counters, gpuStream_t stream) {
  if (channels == 0) return;
  const dim3 grid(unsigned(plan.columns), unsigned(plan.row_blocks));
  dispatch_float(op, dtype, [&]<typename T>() {
    dispatch_vec<T>(op, dtype, plan.vec, [&]<int V>() {
      const T* gt = static_cast<const T*>(dy);
      const T* xt = static_cast<const T*>(x);
      const int64_t ms = relu_mask_stride(channels);
      T* dxt = static_cast<T*>(dx);
      T* drt = static_cast<T*>(dresidual);
      float* part_dyx = workspace + plan.row_blocks * channels;
      // Also with no rows: writes dweight = dbias = 0.
      if (!kFused || drt == nullptr) {
        batch_norm_grad_sums_kernel<T, V, kFused><<<grid, block_of(plan), 0, stream>>>(
            gt, xt, rows, channels, plan.rows_per_block, mean, invstd, dweight, dbias, workspace,
            part_dyx, counters, mask, ms);
        HG_GPU_CHECK_LAUNCH();
        if (rows == 0) return;
        batch_norm_input_grad_kernel<T, V, kFused>
            <<<grid, block_of(plan), 0, stream>>>(gt, xt, dxt, rows, channels, plan.rows_per_block,
                                                  weight, mean, invstd, dweight, dbias, mask, ms);
      } else {
        // The sums pass stores dz = dresidual; the dx pass reads it in place of dy and y (one
        // pass over the tensor fewer: 1.08-1.15x on ResNet shapes, bench/README.md).
        if (dy2 != nullptr)
          batch_norm_grad_sums_kernel<T, V, true, true, true><<<grid, block_of(plan), 0, stream>>>(
              gt, xt, rows, channels, plan.rows_per_block, mean, invstd, dweight, dbias, workspace,
              part_dyx, counters, mask, ms, drt, static_cast<const T*>(dy2));
        else
          batch_norm_grad_sums_kernel<T, V, true, true><<<grid, block_of(plan), 0, stream>>>(
              gt, xt, rows, channels, plan.rows_per_block, mean, invstd, dweight, dbias, workspace,
              part_dyx, counters, mask, ms, drt);
        HG_GPU_CHECK_LAUNCH();
        if (rows == 0) return;
        batch_norm_input_grad_kernel<T, V, false>
            <<<grid, block_of(plan), 0, stream>>>(drt, xt, dxt, rows, channels, plan.rows_per_block,
                                                  weight, mean, invstd, dweight, dbias);
      }
      HG_GPU_CHECK_LAUNCH();
    });
  });
}

}  // namespace

void batch_norm_train_launch(const BatchNormPlan& plan, DType dtype, const void* x, void* y,
                             int64_t rows, int64_t channels, const float* weight, const float* bias,
                             float* running_mean, float* running_var, double momentum, double eps,
                             float* save_mean, float* save_invstd, float* workspace,
                             gpuStream_t stream) {
  train_launch<false>("batch_norm", plan, dtype, x, nullptr, y, nullptr, rows, channels, weight,
                      bias, running_mean, running_var, momentum, eps, save_mean, save_invstd,
                      workspace, stream);
}

void batch_norm_relu_train_launch(const BatchNormPlan& plan, DType dtype, const void* x,
                                  const void* residual, void* y, uint8_t* mask, int64_t rows,
                                  int64_t channels, const float* weight, const float* bias,
                                  float* running_mean, float* running_var, double momentum,
                                  double eps, float* save_mean, float* save_invstd,
                                  float* workspace, gpuStream_t stream) {
  train_launch<true>("batch_norm_relu_train", plan, dtype, x, residual, y, mask, rows, channels,
                     weight, bias, running_mean, running_var, momentum, eps, save_mean, save_invstd,
                     workspace, stream);
}

void batch_norm_eval_launch(const BatchNormPlan& plan, DType dtype, const void* x, void* y,
                            int64_t rows, int64_t channels, const float* weight, const float* bias,
                            const float* running_mean, const float* running_var, double eps,
                            gpuStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const char* op = "batch_norm";
  dispatch_float(op, dtype, [&]<typename T>() {
    dispatch_vec<T>(op, dtype, plan.vec, [&]<int V>() {
      batch_norm_normalize_kernel<T, V, true>
          <<<dim3(unsigned(plan.columns), unsigned(plan.row_blocks)), block_of(plan), 0, stream>>>(
              static_cast<const T*>(x), static_cast<T*>(y), rows, channels, plan.rows_per_block,
              weight, bias, running_mean, running_var, eps);
      HG_GPU_CHECK_LAUNCH();
    });
  });
}

void batch_norm_backward_launch(const BatchNormPlan& plan, DType dtype, const void* dy,
                                const void* x, void* dx, int64_t rows, int64_t channels,
                                const float* weight, const float* mean, const float* invstd,
                                float* dweight, float* dbias, float* workspace, unsigned* counters,
                                gpuStream_t stream) {
  backward_launch<false>("batch_norm_backward", plan, dtype, dy, nullptr, nullptr, x, dx, nullptr,
                         rows, channels, weight, mean, invstd, dweight, dbias, workspace, counters,
                         stream);
}

void batch_norm_input_grad_launch(const BatchNormPlan& plan, DType dtype, const void* dz,
                                  const void* x, void* dx, int64_t rows, int64_t channels,
                                  const float* weight, const float* mean, const float* invstd,
                                  const float* dweight, const float* dbias, gpuStream_t stream) {
  if (rows == 0 || channels == 0) return;
  const char* op = "batch_norm_backward";
  dispatch_float(op, dtype, [&]<typename T>() {
    dispatch_vec<T>(op, dtype, plan.vec, [&]<int V>() {
      batch_norm_input_grad_kernel<T, V, false>
          <<<dim3(unsigned(plan.columns), unsigned(plan.row_blocks)), block_of(plan), 0, stream>>>(
              static_cast<const T*>(dz), static_cast<const T*>(x), static_cast<T*>(dx), rows,
              channels, plan.rows_per_block, weight, mean, invstd, dweight, dbias);
      HG_GPU_CHECK_LAUNCH();
    });
  });
}

void relu_mask_launch(DType dtype, const void* y, uint8_t* mask, int64_t rows, int64_t channels,
                      gpuStream_t stream) {
  dispatch_float("relu_mask", dtype, [&]<typename T>() {
    relu_mask_typed<T>(static_cast<const T*>(y), mask, rows, channels, stream);
  });
}

void batch_norm_relu_backward_launch(const BatchNormPlan& plan, DType dtype, const void* dy,
                                     const void* dy2, const uint8_t* mask, const void* x, void* dx,
                                     void* dresidual, int64_t rows, int64_t channels,
                                     const float* weight, const float* mean, const float* invstd,
                                     float* dweight, float* dbias, float* workspace,
                                     unsigned* counters, gpuStream_t stream) {
  backward_launch<true>("batch_norm_relu_backward", plan, dtype, dy, dy2, mask, x, dx, dresidual,
                        rows, channels, weight, mean, invstd, dweight, dbias, workspace, counters,
                        stream);
}

}  // namespace hg::gpu
