// Softmax cross-entropy: one warp per row (kWarp lanes stride over the classes), the row's
// max / sums by warp shuffles; a block of kThreads holds kThreads / kWarp rows at a time (8 on
// NVIDIA and RDNA, 4 on CDNA), and its warps step over the rows by the whole grid's, so any grid
// covers every row (the host sizes it by the device's warp width); the batch mean (and the correct
// count) by a second one-block kernel that adds the per-row values in a fixed tree, so results are
// deterministic.
//
// Per row, as the CPU: lse = max + log(sum_j exp(x_j - max));
//   loss = -[on * (x_label - lse) + uniform * sum_j (x_j - lse)]
// with on = 1 - s and uniform = s / C for label smoothing s.
#include <cmath>
#include <cstdint>

#include "hourglass/backend/gpu/cross_entropy_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kFinalThreads = 1024;

__device__ inline bool label_in_range(int64_t label, int64_t classes) {
  return label >= 0 && label < classes;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_loss_rows(const T* __restrict__ logits, const int64_t* __restrict__ labels,
                      int64_t rows, int64_t classes, float on, float uniform, T* __restrict__ probs,
                      float* __restrict__ row_loss) {
  const int lane = threadIdx.x % kWarp;
  const int64_t rows_per_block = kThreads / kWarp;
  // The lanes of a warp take the same rows and leave the loop together.
  for (int64_t r = int64_t(blockIdx.x) * rows_per_block + threadIdx.x / kWarp; r < rows;
       r += int64_t(gridDim.x) * rows_per_block) {
    const T* x = logits + r * classes;
    T* p = probs + r * classes;

    float mx = -INFINITY;
    for (int64_t j = lane; j < classes; j += kWarp) mx = fmaxf(mx, to_float(x[j]));
    mx = warp_max(mx);

    float sum_exp = 0.0f, sum_shifted = 0.0f;
    for (int64_t j = lane; j < classes; j += kWarp) {
      const float shifted = to_float(x[j]) - mx;
      sum_exp += expf(shifted);
      sum_shifted += shifted;
    }
    sum_exp = warp_sum(sum_exp);
    sum_shifted = warp_sum(sum_shifted);

    const float inv = 1.0f / sum_exp;
    for (int64_t j = lane; j < classes; j += kWarp)
      p[j] = from_float<T>(expf(to_float(x[j]) - mx) * inv);

    if (lane == 0) {
      const int64_t label = labels[r];
      float loss = NAN;  // a label out of range shows as a NaN loss
      if (label_in_range(label, classes)) {
        const float log_sum = logf(sum_exp);  // lse - max
        const float logp_label = (to_float(x[label]) - mx) - log_sum;
        const float sum_logp = sum_shifted - float(classes) * log_sum;
        loss = -(on * logp_label + uniform * sum_logp);
      }
      row_loss[r] = loss;
    }
  }
}

// out[0] = (sum of values[0..count)) / divisor, by one block in a fixed order.
__global__ void __launch_bounds__(kFinalThreads)
    sum_rows(const float* __restrict__ values, int64_t count, float divisor,
             float* __restrict__ out) {
  __shared__ float scratch[kMaxWarpsPerBlock];
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += values[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[0] = acc / divisor;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_grad(const float* __restrict__ dloss, const T* __restrict__ probs,
                       const int64_t* __restrict__ labels, int64_t rows, int64_t classes,
                       float t_off, float t_on, T* __restrict__ dx) {
  // The CPU's scale, dloss / rows in double rounded once to f32.
  const float scale = float(double(dloss[0]) / double(rows));
  const int64_t n = rows * classes;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / classes, j = i - r * classes;
    const int64_t label = labels[r];
    float g = NAN;  // a label out of range makes its row's gradient NaN
    if (label_in_range(label, classes))
      g = scale * (to_float(probs[i]) - (j == label ? t_on : t_off));
    dx[i] = from_float<T>(g);
  }
}

// A logit's key for ranking, as the CPU ranks: a NaN first at index 0, last elsewhere.
__device__ inline float rank_key(float v, int64_t j) {
  return isnan(v) ? (j == 0 ? INFINITY : -INFINITY) : v;
}

// row_hit[r] = 1 when fewer than k logits of row r rank before its label's (a greater key, or
// an equal one at a lower index), else 0; NaN for a label out of range. One warp per row:
// each lane counts its columns, the warp sums the counts (exact in f32 below 2^24).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    top_k_hits(const T* __restrict__ logits, const int64_t* __restrict__ labels, int64_t rows,
               int64_t classes, int64_t k, float* __restrict__ row_hit) {
  const int lane = threadIdx.x % kWarp;
  const int64_t rows_per_block = kThreads / kWarp;
  for (int64_t r = int64_t(blockIdx.x) * rows_per_block + threadIdx.x / kWarp; r < rows;
       r += int64_t(gridDim.x) * rows_per_block) {
    const T* x = logits + r * classes;
    const int64_t label = labels[r];
    const bool valid = label_in_range(label, classes);
    const float own = valid ? rank_key(to_float(x[label]), label) : 0.0f;
    float ahead = 0;
    for (int64_t j = lane; j < classes && valid; j += kWarp) {
      const float v = rank_key(to_float(x[j]), j);
      ahead += (v > own || (v == own && j < label)) ? 1.0f : 0.0f;
    }
    for (int m = kWarp / 2; m > 0; m >>= 1) ahead += shfl_xor(ahead, m);
    if (lane == 0) row_hit[r] = valid ? (ahead < float(k) ? 1.0f : 0.0f) : NAN;
  }
}

}  // namespace

void launch_cross_entropy(const void* logits, const int64_t* labels, int64_t rows, int64_t classes,
                          float on, float uniform, DType dtype, void* probs, float* row_loss,
                          float* loss, gpuStream_t stream) {
  if (rows <= 0 || classes <= 0) return;  // the host side refuses both
  dispatch_float("cross_entropy", dtype, [&]<typename T>() {
    softmax_loss_rows<T><<<warp_per_row_blocks(rows, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), labels, rows, classes, on, uniform, static_cast<T*>(probs),
        row_loss);
  });
  HG_GPU_CHECK_LAUNCH();
  sum_rows<<<1, kFinalThreads, 0, stream>>>(row_loss, rows, float(rows), loss);
  HG_GPU_CHECK_LAUNCH();
}

void launch_cross_entropy_backward(const float* dloss, const void* probs, const int64_t* labels,
                                   int64_t rows, int64_t classes, float t_off, float t_on,
                                   DType dtype, void* dlogits, gpuStream_t stream) {
  const int64_t n = rows * classes;
  if (n <= 0) return;
  dispatch_float("cross_entropy_backward", dtype, [&]<typename T>() {
    cross_entropy_grad<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        dloss, static_cast<const T*>(probs), labels, rows, classes, t_off, t_on,
        static_cast<T*>(dlogits));
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_count_correct(const void* logits, const int64_t* labels, int64_t rows, int64_t classes,
                          int64_t k, DType dtype, float* row_hit, float* out, gpuStream_t stream) {
  if (rows > 0 && classes > 0) {
    dispatch_float("count_correct", dtype, [&]<typename T>() {
      top_k_hits<T><<<warp_per_row_blocks(rows, kThreads), kThreads, 0, stream>>>(
          static_cast<const T*>(logits), labels, rows, classes, k, row_hit);
    });
    HG_GPU_CHECK_LAUNCH();
  } else {
    rows = 0;  // no rows (or no classes: refused by the host side): the count is 0
  }
  sum_rows<<<1, kFinalThreads, 0, stream>>>(row_hit, rows, 1.0f, out);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
