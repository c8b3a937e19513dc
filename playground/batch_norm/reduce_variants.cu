// Where the batch-norm passes' fixed costs go, and variants that cut them (bench/README.md,
// eighth session). The statistics pass and the backward's sums pass (batch_norm_stats_kernel,
// batch_norm_grad_sums_kernel with the ReLU mask) run 15-25 us on tensors of 13-51 MB that a
// copy reads in 4-14 us. Each is copied here with the reduction's stopping point and its
// last-block tail as template arguments:
//
//   stop: full | loop (no block reduction; loop_live keeps every per-thread value) | partial
//         (the block's partial written, no ticket) | ticket (every block takes its ticket, the
//         last one skips the merge)
//   tail: flat4 (the library's until the eighth session: the last block merges every
//         partial, four loaded at a time)
//         | flat16 | group16 (the last block of each group of 16 merges the group's partials,
//         the last group's the groups') | vec4 (four channels a thread, float4 loads) | kernel
//         (a second kernel merges them, spread over channels: 32 x 16 or 8 x 64 threads)
//
// the grid at one block per multiprocessor (half the partials) beside the library's two, and
// for the statistics a loop of plain sums of x minus the thread's own first value (`sl_`: no
// division a row). Then the fused forward's normalising pass (ReLU and mask, no residual) with
// its per-channel coefficients in registers (regs4: the library's before the eighth session,
// which spilled), with two rows in flight, in shared memory (smem4: the library's now), and
// folded into one multiply-add (other bits).
// The full variants are checked against the library's (since the eighth session its
// statistics are the `sl_` loop with a second kernel): "same" bit for bit, else the largest
// relative difference. CSV rows: shape, kernel, variant, microseconds a call,
// the MB its pass moves and GB/s, check.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 --extended-lambda -Isrc playground/batch_norm/reduce_variants.cu
//   ./a.out [repeats]
#include <algorithm>
#include <cmath>
#include <string>

#include "harness.cuh"

namespace hg::gpu {
namespace {

enum Stop { kFull = 0, kStopLoop = 1, kStopPartial = 2, kStopTicket = 3, kStopLoopLive = 4 };
enum Tail { kFlat4 = 0, kFlat16 = 1, kGroup16 = 2, kKernel = 3, kVec4 = 4 };
constexpr int kGroup = 16;

// Where the variants keep their partials: the library's two [blocks, channels] arrays, the
// groups' two [groups, channels] arrays, the column counters and the group counters.
struct Scratch {
  float* part_a;
  float* part_b;
  float* group_a;
  float* group_b;
  unsigned* counters;
  unsigned* group_counters;
};

// Lane `lane` of `lanes` merges partials lane, lane + lanes, ... < count of (a, b) arrays with
// row `stride`, in order, kBatch loaded before any is merged; rows_of(p) is partial p's count.
template <int kBatch, typename Merge, typename RowsOf>
__device__ inline void merge_lane(const Merge& merge, const float* pa, const float* pb,
                                  int64_t stride, int64_t count, int lane, int lanes,
                                  const RowsOf& rows_of, float& n, float& a, float& b) {
  for (int64_t p0 = lane; p0 < count; p0 += int64_t(kBatch) * lanes) {
    float va[kBatch], vb[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int64_t p = p0 + int64_t(k) * lanes;
      if (p < count) {
        va[k] = load_partial(pa + p * stride);
        vb[k] = load_partial(pb + p * stride);
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int64_t p = p0 + int64_t(k) * lanes;
      if (p < count) {
        const float np = rows_of(p);
        merge(n, a, b, np, va[k], vb[k]);
        n += np;
      }
    }
  }
}

// Tree over `lanes` lanes of `width` values (s_n the counts); result in s_a/s_b[0, width).
template <typename Merge>
__device__ inline void merge_lanes_tree(const Merge& merge, float* s_a, float* s_b, float* s_n,
                                        int t, int width, int lanes) {
  __syncthreads();
  for (int s = lanes / 2; s >= 1; s >>= 1) {
    for (int e = t; e < s * width; e += int(blockDim.x * blockDim.y)) {
      merge(s_n[e], s_a[e], s_b[e], s_n[e + s * width], s_a[e + s * width], s_b[e + s * width]);
      s_n[e] += s_n[e + s * width];
    }
    __syncthreads();
  }
}

// reduce_column (batch_norm_common.cuh) with the stopping point and tail as arguments.
template <int V, int kStop, int kTail, typename Merge>
__device__ inline bool reduce_column_x(float* s_a, float* s_b, float* s_n, unsigned* s_ticket,
                                       const Merge& merge, int64_t rows, int64_t channels,
                                       int64_t rows_per_block, const Scratch& w) {
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int64_t column = blockIdx.x, block = blockIdx.y, blocks = gridDim.y;
  const int64_t len = min64(rows_per_block, rows - block * rows_per_block);
  __syncthreads();
  for (int s = int(blockDim.y) / 2, shift = log2_of(int(blockDim.y)); s >= 1; s >>= 1, --shift) {
    for (int e = t; e < s * width; e += kThreads) {
      const int l = e / width;
      merge(congruent_count(len, shift, l), s_a[e], s_b[e], congruent_count(len, shift, l + s),
            s_a[e + s * width], s_b[e + s * width]);
    }
    __syncthreads();
  }
  for (int e = t; e < width; e += kThreads) {
    const int64_t c = column * width + e;
    if (c < channels) {
      w.part_a[block * channels + c] = s_a[e];
      w.part_b[block * channels + c] = s_b[e];
    }
  }
  if (kStop == kStopPartial || kTail == kKernel) return false;
  const int lanes = kThreads / width;
  const int l = t / width;
  const int64_t c = column * width + t % width;
  const int64_t last_rows = rows - (blocks - 1) * rows_per_block;
  __threadfence();
  __syncthreads();
  if constexpr (kTail == kGroup16) {
    const int64_t groups = (blocks + kGroup - 1) / kGroup, g = block / kGroup, g0 = g * kGroup;
    const int64_t size = min64(kGroup, blocks - g0);
    unsigned* gc = &w.group_counters[column * groups + g];
    if (t == 0) *s_ticket = atomicAdd(gc, 1u);
    __syncthreads();
    if (*s_ticket != unsigned(size - 1)) return false;
    __threadfence();
    if (t == 0) *gc = 0u;
    if (kStop == kStopTicket) return false;
    float n = 0.0f, a = 0.0f, b = 0.0f;
    if (c < channels)
      merge_lane<kGroup>(
          merge, w.part_a + g0 * channels + c, w.part_b + g0 * channels + c, channels, size, l,
          lanes,
          [&](int64_t p) { return g0 + p == blocks - 1 ? float(last_rows) : float(rows_per_block); },
          n, a, b);
    s_a[t] = a;
    s_b[t] = b;
    s_n[t] = n;
    merge_lanes_tree(merge, s_a, s_b, s_n, t, width, lanes);
    if (t < width && c < channels) {
      w.group_a[g * channels + c] = s_a[t];
      w.group_b[g * channels + c] = s_b[t];
    }
    __threadfence();
    __syncthreads();
    if (t == 0) *s_ticket = atomicAdd(&w.counters[column], 1u);
    __syncthreads();
    if (*s_ticket != unsigned(groups - 1)) return false;
    __threadfence();
    if (t == 0) w.counters[column] = 0u;
    n = a = b = 0.0f;
    if (c < channels)
      merge_lane<4>(
          merge, w.group_a + c, w.group_b + c, channels, groups, l, lanes,
          [&](int64_t j) {
            const int64_t members = min64(kGroup, blocks - j * kGroup);
            return float(members * rows_per_block) -
                   (j == groups - 1 ? float(rows_per_block - last_rows) : 0.0f);
          },
          n, a, b);
    s_a[t] = a;
    s_b[t] = b;
    s_n[t] = n;
    merge_lanes_tree(merge, s_a, s_b, s_n, t, width, lanes);
    return true;
  } else {
    if (t == 0) *s_ticket = atomicAdd(&w.counters[column], 1u);
    __syncthreads();
    if (*s_ticket != unsigned(blocks - 1)) return false;
    __threadfence();
    if (t == 0) w.counters[column] = 0u;
    if (kStop == kStopTicket) return false;
    if constexpr (kTail == kVec4) {
      // Four channels a thread (float4 loads, two partials in flight): lanes4 lanes a channel.
      const int q = width / 4, lanes4 = kThreads / q, l4 = t / q;
      const int64_t c0 = column * width + 4 * (t % q);
      float n = 0.0f, a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
      if (c0 < channels) {
        for (int64_t p0 = l4; p0 < blocks; p0 += 2 * int64_t(lanes4)) {
          float4 va[2], vb[2];
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            const int64_t p = p0 + int64_t(k) * lanes4;
            if (p < blocks) {
              va[k] = __ldcg(reinterpret_cast<const float4*>(w.part_a + p * channels + c0));
              vb[k] = __ldcg(reinterpret_cast<const float4*>(w.part_b + p * channels + c0));
            }
          }
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            const int64_t p = p0 + int64_t(k) * lanes4;
            if (p < blocks) {
              const float np = p == blocks - 1 ? float(last_rows) : float(rows_per_block);
              merge(n, a[0], b[0], np, va[k].x, vb[k].x);
              merge(n, a[1], b[1], np, va[k].y, vb[k].y);
              merge(n, a[2], b[2], np, va[k].z, vb[k].z);
              merge(n, a[3], b[3], np, va[k].w, vb[k].w);
              n += np;
            }
          }
        }
      }
      const int base = l4 * width + 4 * (t % q);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s_a[base + i] = a[i];
        s_b[base + i] = b[i];
        s_n[base + i] = n;
      }
      merge_lanes_tree(merge, s_a, s_b, s_n, t, width, lanes4);
      return true;
    }
    float n = 0.0f, a = 0.0f, b = 0.0f;
    auto rows_of = [&](int64_t p) {
      return p == blocks - 1 ? float(last_rows) : float(rows_per_block);
    };
    if (c < channels) {
      if constexpr (kTail == kFlat16)
        merge_lane<16>(merge, w.part_a + c, w.part_b + c, channels, blocks, l, lanes, rows_of, n, a,
                       b);
      else
        merge_lane<4>(merge, w.part_a + c, w.part_b + c, channels, blocks, l, lanes, rows_of, n, a,
                      b);
    }
    s_a[t] = a;
    s_b[t] = b;
    s_n[t] = n;
    merge_lanes_tree(merge, s_a, s_b, s_n, t, width, lanes);
    return true;
  }
}

// The statistics' finish for channel c from its merged (mean of x - shift, M2).
__device__ inline void finish_stats(const bf16* x, int64_t c, int64_t rows, float mean_d, float m2,
                                    float* running_mean, float* running_var, double momentum,
                                    double eps, float* save_mean, float* save_invstd) {
  const double count = double(rows);
  const double m = double(to_float(x[c])) + double(mean_d);
  const double var = fmax(0.0, double(m2) / count);
  save_mean[c] = float(m);
  save_invstd[c] = float(1.0 / sqrt(var + eps));
  const double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
  running_mean[c] = float((1.0 - momentum) * double(running_mean[c]) + momentum * m);
  running_var[c] = float((1.0 - momentum) * double(running_var[c]) + momentum * unbiased);
}

// batch_norm_stats_kernel<bf16, 8> with the variant's stop and tail.
template <int kStop, int kTail, int kLoop = 0>
__global__ void HG_BN_LAUNCH_BOUNDS stats_x(const bf16* __restrict__ x, int64_t rows,
                                            int64_t channels, int64_t rows_per_block,
                                            float* running_mean, float* running_var,
                                            double momentum, double eps, float* save_mean,
                                            float* save_invstd, Scratch w) {
  constexpr int V = 8;
  constexpr int kRows = kRowsPerStep<bf16, V, 1>;
  __shared__ float s_mean[kThreads * V];
  __shared__ float s_m2[kThreads * V];
  __shared__ float s_n[4 * kThreads];
  __shared__ unsigned s_ticket;
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  float n = 0.0f, mean[V], m2[V];
#pragma unroll
  for (int i = 0; i < V; ++i) mean[i] = m2[i] = 0.0f;
  if (kLoop == 1 && vector * V < channels) {
    // Sums of x - (the thread's first value): no division a row. The thread's M2 is
    // s2 - s1^2 / n, whose cancellation is bounded by its row count (its shift is one of its
    // values), then the Welford merges as before.
    const int64_t step = int64_t(by) * channels;
    const bf16* p = x + (first + ty) * channels + vector * V;
    const Pack<bf16, V> global_first = load_pack<bf16, V>(x + vector * V);
    Pack<bf16, V> own_first = global_first;
    if (ty < len) own_first = load_pack<bf16, V>(p);
    float sh[V], s1[V], s2[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      sh[i] = to_float(own_first.v[i]);
      s1[i] = s2[i] = 0.0f;
    }
    for (int64_t o = ty; o < len; o += by * kRows, p += kRows * step) {
      Pack<bf16, V> xs[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k)
        if (o + k * by < len) xs[k] = load_pack<bf16, V>(p + k * step);
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          n += 1.0f;
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float d = to_float(xs[k].v[i]) - sh[i];
            s1[i] += d;
            s2[i] = __fmaf_rn(d, d, s2[i]);
          }
        }
      }
    }
    if (n > 0.0f) {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float md = s1[i] / n;
        mean[i] = (sh[i] - to_float(global_first.v[i])) + md;
        m2[i] = fmaxf(0.0f, s2[i] - s1[i] * md);
      }
    }
  } else if (vector * V < channels) {
    const Pack<bf16, V> first_row = load_pack<bf16, V>(x + vector * V);
    const int64_t step = int64_t(by) * channels;
    const bf16* p = x + (first + ty) * channels + vector * V;
    for (int64_t o = ty; o < len; o += by * kRows, p += kRows * step) {
      Pack<bf16, V> xs[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k)
        if (o + k * by < len) xs[k] = load_pack<bf16, V>(p + k * step);
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          n += 1.0f;
          const float inv = 1.0f / n;
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float v = to_float(xs[k].v[i]) - to_float(first_row.v[i]);
            const float delta = v - mean[i];
            mean[i] += delta * inv;
            m2[i] += delta * (v - mean[i]);
          }
        }
      }
    }
  }
  if constexpr (kStop == kStopLoop) {
    if (mean[0] == 1234.5f && m2[1] == 0.25f) w.part_a[0] = n;  // keeps the loop
    return;
  }
  if constexpr (kStop == kStopLoopLive) {
    float all = n;
#pragma unroll
    for (int i = 0; i < V; ++i) all += mean[i] + m2[i];
    if (all == 1234.5f) w.part_a[0] = all;  // keeps every value
    return;
  }
  const int e = ty * int(blockDim.x) * V + int(threadIdx.x) * V;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    s_mean[e + i] = mean[i];
    s_m2[e + i] = m2[i];
  }
  if (!reduce_column_x<V, kStop, kTail>(s_mean, s_m2, s_n, &s_ticket, WelfordMerge{}, rows,
                                        channels, rows_per_block, w))
    return;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int width = int(blockDim.x) * V;
  const int64_t c = int64_t(blockIdx.x) * width + t;
  if (t < width && c < channels)
    finish_stats(x, c, rows, s_mean[t], s_m2[t], running_mean, running_var, momentum, eps,
                 save_mean, save_invstd);
}

// batch_norm_grad_sums_kernel<bf16, 8, kMask = true> with the variant's stop and tail.
template <int kStop, int kTail>
__global__ void HG_BN_LAUNCH_BOUNDS grad_sums_x(const bf16* __restrict__ dy,
                                                const bf16* __restrict__ x, int64_t rows,
                                                int64_t channels, int64_t rows_per_block,
                                                const float* __restrict__ mean_in,
                                                const float* __restrict__ invstd, float* dweight,
                                                float* dbias, Scratch w,
                                                const uint8_t* __restrict__ mask,
                                                int64_t mask_stride) {
  constexpr int V = 8;
  constexpr int kRows = kRowsPerStep<bf16, V, 2>;
  __shared__ float s_dy[kThreads * V];
  __shared__ float s_dyx[kThreads * V];
  __shared__ float s_n[4 * kThreads];
  __shared__ unsigned s_ticket;
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  float sum_dy[V], sum_dyx[V];
#pragma unroll
  for (int i = 0; i < V; ++i) sum_dy[i] = sum_dyx[i] = 0.0f;
  if (vector * V < channels) {
    float mean[V];
#pragma unroll
    for (int i = 0; i < V; ++i) mean[i] = mean_in[vector * V + i];
    const int64_t step = int64_t(by) * channels;
    const int64_t offset = (first + ty) * channels + vector * V;
    const bf16* pg = dy + offset;
    const bf16* px = x + offset;
    const uint8_t* pm = mask + (first + ty) * mask_stride;
    const int64_t mask_step = int64_t(by) * mask_stride;
    for (int64_t o = ty; o < len;
         o += by * kRows, pg += kRows * step, px += kRows * step, pm += kRows * mask_step) {
      Pack<bf16, V> gs[kRows], xs[kRows];
      unsigned ms[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          gs[k] = load_pack<bf16, V>(pg + k * step);
          xs[k] = load_pack<bf16, V>(px + k * step);
          ms[k] = mask_bits<V>(pm + k * mask_step, vector);
        }
      }
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float g = (ms[k] >> i) & 1u ? to_float(gs[k].v[i]) : 0.0f;
            sum_dy[i] += g;
            sum_dyx[i] += g * (to_float(xs[k].v[i]) - mean[i]);
          }
        }
      }
    }
  }
  if constexpr (kStop == kStopLoop) {
    if (sum_dy[0] == 1234.5f && sum_dyx[1] == 0.25f) w.part_a[0] = sum_dy[2];
    return;
  }
  if constexpr (kStop == kStopLoopLive) {
    float all = 0.0f;
#pragma unroll
    for (int i = 0; i < V; ++i) all += sum_dy[i] + sum_dyx[i];
    if (all == 1234.5f) w.part_a[0] = all;
    return;
  }
  const int e = ty * int(blockDim.x) * V + int(threadIdx.x) * V;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    s_dy[e + i] = sum_dy[i];
    s_dyx[e + i] = sum_dyx[i];
  }
  if (!reduce_column_x<V, kStop, kTail>(s_dy, s_dyx, s_n, &s_ticket, SumMerge{}, rows, channels,
                                        rows_per_block, w))
    return;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int width = int(blockDim.x) * V;
  const int64_t c = int64_t(blockIdx.x) * width + t;
  if (t < width && c < channels) {
    dbias[c] = s_dy[t];
    dweight[c] = s_dyx[t] * invstd[c];
  }
}

// The tail as a kernel of its own: block (32 channels, 16 lanes); lane y merges partials y,
// y + 16, ... in order, then a tree over the lanes. kStats: the statistics' finish, else the
// gradient sums'.
template <bool kStats>
__global__ void __launch_bounds__(512) finish_kernel(
    const float* __restrict__ part_a, const float* __restrict__ part_b, int64_t blocks,
    int64_t rows, int64_t rows_per_block, int64_t channels, const bf16* x, float* running_mean,
    float* running_var, double momentum, double eps, float* out_a, float* out_b,
    const float* invstd) {
  __shared__ float s_a[512], s_b[512], s_n[512];
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int width = int(blockDim.x), lanes = int(blockDim.y);
  const int64_t c = int64_t(blockIdx.x) * width + threadIdx.x;
  const int64_t last_rows = rows - (blocks - 1) * rows_per_block;
  float n = 0.0f, a = 0.0f, b = 0.0f;
  auto rows_of = [&](int64_t p) {
    return p == blocks - 1 ? float(last_rows) : float(rows_per_block);
  };
  if (c < channels) {
    if constexpr (kStats)
      merge_lane<8>(WelfordMerge{}, part_a + c, part_b + c, channels, blocks, int(threadIdx.y),
                    lanes, rows_of, n, a, b);
    else
      merge_lane<8>(SumMerge{}, part_a + c, part_b + c, channels, blocks, int(threadIdx.y), lanes,
                    rows_of, n, a, b);
  }
  s_a[t] = a;
  s_b[t] = b;
  s_n[t] = n;
  if constexpr (kStats)
    merge_lanes_tree(WelfordMerge{}, s_a, s_b, s_n, t, width, lanes);
  else
    merge_lanes_tree(SumMerge{}, s_a, s_b, s_n, t, width, lanes);
  if (t < width && c < channels) {
    if constexpr (kStats) {
      finish_stats(x, c, rows, s_a[t], s_b[t], running_mean, running_var, momentum, eps, out_a,
                   out_b);
    } else {
      out_b[c] = s_a[t];             // dbias
      out_a[c] = s_b[t] * invstd[c];  // dweight
    }
  }
}

// batch_norm_normalize_kernel<bf16, 8, false, false, true, true> (the fused forward without
// residual: ReLU and mask out) with kRows rows in flight and its coefficients kept as
// kCoef: 0 registers (the library's), 1 shared memory, 2 folded to y = x * scale + (shift -
// mean * scale) (other bits).
template <int kRows, int kCoef>
__global__ void HG_BN_LAUNCH_BOUNDS normalize_x(const bf16* __restrict__ x, bf16* __restrict__ y,
                                                int64_t rows, int64_t channels,
                                                int64_t rows_per_block,
                                                const float* __restrict__ weight,
                                                const float* __restrict__ bias,
                                                const float* __restrict__ mean_in,
                                                const float* __restrict__ spread,
                                                uint8_t* __restrict__ mask, int64_t mask_stride) {
  constexpr int V = 8;
  __shared__ float s_coef[3][kThreads * V / 32 + V];  // [mean, scale, shift][column's channels]
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float mean[V], scale[V], shift[V];
  if constexpr (kCoef == 1) {
    const int width = int(blockDim.x) * V;
    const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
    if (t < width) {
      const int64_t c = int64_t(blockIdx.x) * width + t;
      if (c < channels) {
        s_coef[0][t] = mean_in[c];
        s_coef[1][t] = weight[c] * spread[c];
        s_coef[2][t] = bias[c];
      }
    }
    __syncthreads();
  }
  if (vector * V >= channels) return;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  if constexpr (kCoef != 1) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int64_t c = vector * V + i;
      mean[i] = mean_in[c];
      scale[i] = weight[c] * spread[c];
      shift[i] = bias[c];
      if constexpr (kCoef == 2) shift[i] = shift[i] - mean[i] * scale[i];
    }
  }
  const int64_t step = int64_t(by) * channels;
  for (int64_t j = steps_of(len, ty, by * kRows) - 1; j >= 0; --j) {
    const int64_t o = ty + j * by * kRows;
    const int64_t offset = (first + o) * channels + vector * V;
    Pack<bf16, V> xs[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k)
      if (o + k * by < len) xs[k] = load_pack<bf16, V>(x + offset + k * step);
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        if constexpr (kCoef == 1) {
          load_shared<V>(&s_coef[0][threadIdx.x * V], mean);
          load_shared<V>(&s_coef[1][threadIdx.x * V], scale);
          load_shared<V>(&s_coef[2][threadIdx.x * V], shift);
        }
        Pack<bf16, V> out;
        unsigned bits = 0;
#pragma unroll
        for (int i = 0; i < V; ++i) {
          float v = kCoef == 2 ? __fmaf_rn(to_float(xs[k].v[i]), scale[i], shift[i])
                               : (to_float(xs[k].v[i]) - mean[i]) * scale[i] + shift[i];
          v = v < 0.0f ? 0.0f : v;
          out.v[i] = from_float<bf16>(v);
          bits |= unsigned(to_float(out.v[i]) > 0.0f) << i;
        }
        *reinterpret_cast<Pack<bf16, V>*>(y + offset + k * step) = out;
        mask[(first + o + k * by) * mask_stride + vector] = uint8_t(bits);
      }
    }
  }
}

}  // namespace
}  // namespace hg::gpu

using namespace hg;
using namespace hg::gpu;
using namespace hg::gpu::playground;

namespace {

// "same" (bit for bit), the largest relative difference, or "NAN".
std::string compare(const float* a, const float* b, size_t n) {
  const auto ha = host_copy(a, n), hb = host_copy(b, n);
  if (std::memcmp(ha.data(), hb.data(), n * 4) == 0) return "same";
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(ha[i]) || !std::isfinite(hb[i])) return "NAN";
    worst = std::max(worst, std::fabs(double(ha[i]) - hb[i]) / std::max(1e-6, std::fabs(double(ha[i]))));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "rel%.1e", worst);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  struct Shape {
    const char* model;
    int64_t rows, channels;
  };
  const Shape shapes[] = {
      {"r50", 802816, 64},  {"r50", 802816, 256}, {"r50", 200704, 128}, {"r50", 200704, 512},
      {"r50", 50176, 256},  {"r50", 50176, 1024}, {"r50", 12544, 512},  {"r50", 12544, 2048},
      {"r18", 524288, 64},  {"r18", 131072, 128}, {"r18", 32768, 256},  {"r18", 8192, 512}};
  int sms = 0;
  HG_GPU_CHECK(gpuDeviceGetAttribute(&sms, gpuDevAttrMultiProcessorCount, 0));
  gpuStream_t s;
  HG_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  bool ok = true;
  std::printf("model,rows,channels,kernel,variant,us,read_mb,gb_per_s,check\n");
  for (const Shape& sh : shapes) {
    using T = bf16;
    const int64_t n = sh.rows * sh.channels, c = sh.channels;
    std::vector<uint16_t> hx(static_cast<size_t>(n)), hdy(hx.size());
    for (auto& v : hx) v = to_bf16_bits(3.0f * uniform() - 1.0f);
    for (auto& v : hdy) v = to_bf16_bits(uniform() - 0.5f);
    std::vector<uint8_t> hmask(static_cast<size_t>(sh.rows * relu_mask_stride(c)));
    for (auto& v : hmask) v = uint8_t(uniform() * 256.0f);
    std::vector<float> hw(static_cast<size_t>(c)), zeros(hw.size(), 0.0f), ones(hw.size(), 1.0f);
    for (auto& v : hw) v = 0.5f + uniform();
    T* x = reinterpret_cast<T*>(device_copy(hx));
    T* dy = reinterpret_cast<T*>(device_copy(hdy));
    uint8_t* mask = device_copy(hmask);
    T* scratch_copy = nullptr;
    HG_GPU_CHECK(gpuMalloc(&scratch_copy, n * 2));
    float* rm = device_copy(zeros);
    float* rv = device_copy(ones);
    float *ref_a, *ref_b, *out_a, *out_b;
    for (float** p : {&ref_a, &ref_b, &out_a, &out_b}) HG_GPU_CHECK(gpuMalloc(p, c * 4));
    float* invstd = device_copy(hw);
    const uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(x)) |
                          reinterpret_cast<uintptr_t>(dy);
    const BatchNormPlan plan = batch_norm_plan(sh.rows, c, DType::BF16, bits, sms);
    BatchNormPlan plan1 = plan;  // one block a multiprocessor
    cover_rows(sh.rows, int64_t(plan.block_y) * kMinRowsPerThread, plan.columns, sms, 1,
               plan1.row_blocks, plan1.rows_per_block);
    Scratch w{};
    const int64_t groups = ceil_div(plan.row_blocks, kGroup);
    HG_GPU_CHECK(gpuMalloc(&w.part_a, plan.row_blocks * c * 4));
    HG_GPU_CHECK(gpuMalloc(&w.part_b, plan.row_blocks * c * 4));
    HG_GPU_CHECK(gpuMalloc(&w.group_a, groups * c * 4));
    HG_GPU_CHECK(gpuMalloc(&w.group_b, groups * c * 4));
    HG_GPU_CHECK(gpuMalloc(&w.counters, plan.columns * 4));
    HG_GPU_CHECK(gpuMalloc(&w.group_counters, plan.columns * groups * 4));
    HG_GPU_CHECK(gpuMemsetAsync(w.counters, 0, plan.columns * 4, s));
    HG_GPU_CHECK(gpuMemsetAsync(w.group_counters, 0, plan.columns * groups * 4, s));
    const dim3 block = block_of(plan);
    auto grid_of = [](const BatchNormPlan& p) {
      return dim3(unsigned(p.columns), unsigned(p.row_blocks));
    };
    const double mb = double(n) * 2 / 1e6;
    auto row = [&](const char* kernel, const char* variant, double us, double tensors,
                   const std::string& check) {
      std::printf("%s,%lld,%lld,%s,%s,%.1f,%.1f,%.0f,%s\n", sh.model, (long long)sh.rows,
                  (long long)c, kernel, variant, us, tensors * mb, tensors * mb * 1e3 / us,
                  check.c_str());
    };
    row("copy", "copy",
        time_us(s, repeats,
                [&] {
                  copy_kernel<<<unsigned(4 * sms), 512, 0, s>>>(
                      reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(scratch_copy),
                      n * 2 / 16);
                }),
        2, "-");

    // ---- statistics
    float* lib_ws = nullptr;  // the library's statistics: its two passes
    HG_GPU_CHECK(gpuMalloc(&lib_ws, batch_norm_workspace_floats(plan, c) * 4));
    auto stats_lib = [&](const BatchNormPlan& p, float* mean, float* inv) {
      launch_batch_norm_stats<T, 8>(p, x, sh.rows, c, rm, rv, 0.1, 1e-5, mean, inv, lib_ws, s);
    };
    stats_lib(plan, ref_a, ref_b);
    HG_GPU_CHECK(gpuStreamSynchronize(s));
    row("stats", "lib", time_us(s, repeats, [&] { stats_lib(plan, ref_a, ref_b); }), 1, "-");
    auto stats_variant = [&](const char* name, auto launch, bool full) {
      launch();
      HG_GPU_CHECK(gpuStreamSynchronize(s));
      std::string check = "-";
      if (full) {
        check = compare(ref_a, out_a, size_t(c)) + "/" + compare(ref_b, out_b, size_t(c));
        ok &= check.find("NAN") == std::string::npos;
      }
      row("stats", name, time_us(s, repeats, launch), 1, check);
    };
#define STATS(STOP, TAIL, P)                                                                  \
  [&] {                                                                                       \
    stats_x<STOP, TAIL><<<grid_of(P), block, 0, s>>>(x, sh.rows, c, P.rows_per_block, rm, rv, \
                                                     0.1, 1e-5, out_a, out_b, w);             \
  }
#define STATS_SL(STOP, TAIL, P)                                                          \
  [&] {                                                                                  \
    stats_x<STOP, TAIL, 1><<<grid_of(P), block, 0, s>>>(x, sh.rows, c, P.rows_per_block, \
                                                        rm, rv, 0.1, 1e-5, out_a, out_b, w); \
  }
    stats_variant("flat4", STATS(kFull, kFlat4, plan), true);
    stats_variant("stop_loop", STATS(kStopLoop, kFlat4, plan), false);
    stats_variant("stop_loop_live", STATS(kStopLoopLive, kFlat4, plan), false);
    stats_variant("stop_partial", STATS(kStopPartial, kFlat4, plan), false);
    stats_variant("stop_ticket", STATS(kStopTicket, kFlat4, plan), false);
    stats_variant("vec4", STATS(kFull, kVec4, plan), true);
    stats_variant("flat4_1sm", STATS(kFull, kFlat4, plan1), true);
    auto finish = [&](dim3 fb) {
      finish_kernel<true><<<unsigned(ceil_div(c, fb.x)), fb, 0, s>>>(
          w.part_a, w.part_b, plan.row_blocks, sh.rows, plan.rows_per_block, c, x, rm, rv, 0.1,
          1e-5, out_a, out_b, nullptr);
    };
    stats_variant("kernel", [&] { STATS(kFull, kKernel, plan)(); finish(dim3(32, 16)); }, true);
    stats_variant("kernel8", [&] { STATS(kFull, kKernel, plan)(); finish(dim3(8, 64)); }, true);
    stats_variant("sl_stop_loop_live", STATS_SL(kStopLoopLive, kFlat4, plan), false);
    stats_variant("sl_stop_partial", STATS_SL(kStopPartial, kFlat4, plan), false);
    stats_variant("sl_flat4", STATS_SL(kFull, kFlat4, plan), true);
    stats_variant("sl_vec4", STATS_SL(kFull, kVec4, plan), true);
    stats_variant("sl_kernel8", [&] { STATS_SL(kFull, kKernel, plan)(); finish(dim3(8, 64)); },
                  true);
#undef STATS
#undef STATS_SL

    // ---- the fused forward's normalising pass (ReLU, mask out, no residual)
    {
      bf16 *y_lib, *y_var;
      uint8_t *m_lib, *m_var;
      HG_GPU_CHECK(gpuMalloc(&y_lib, n * 2));
      HG_GPU_CHECK(gpuMalloc(&y_var, n * 2));
      HG_GPU_CHECK(gpuMalloc(&m_lib, sh.rows * relu_mask_stride(c)));
      HG_GPU_CHECK(gpuMalloc(&m_var, sh.rows * relu_mask_stride(c)));
      float* bias = device_copy(zeros);
      const int64_t ms = relu_mask_stride(c);
      auto lib = [&] {
        batch_norm_normalize_kernel<T, 8, false, false, true, true><<<grid_of(plan), block, 0, s>>>(
            x, y_lib, sh.rows, c, plan.rows_per_block, invstd, bias, ref_a, ref_b, 0.0, nullptr,
            m_lib, ms);
      };
      lib();
      HG_GPU_CHECK(gpuStreamSynchronize(s));
      const double nz_tensors = 2.0 + 1.0 / 16.0;
      row("normalize", "lib", time_us(s, repeats, lib), nz_tensors, "-");
      auto variant = [&](const char* name, auto launch) {
        launch();
        HG_GPU_CHECK(gpuStreamSynchronize(s));
        std::vector<uint16_t> a(static_cast<size_t>(n)), b(a.size());
        HG_GPU_CHECK(gpuMemcpy(a.data(), y_lib, n * 2, gpuMemcpyDeviceToHost));
        HG_GPU_CHECK(gpuMemcpy(b.data(), y_var, n * 2, gpuMemcpyDeviceToHost));
        size_t diff = 0;
        for (size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
        char check[48];
        std::snprintf(check, sizeof check, diff ? "%zu differ" : "same", diff);
        row("normalize", name, time_us(s, repeats, launch), nz_tensors, check);
      };
#define NZ(R, K)                                                                           \
  [&] {                                                                                    \
    normalize_x<R, K><<<grid_of(plan), block, 0, s>>>(x, y_var, sh.rows, c,                \
                                                      plan.rows_per_block, invstd, bias,   \
                                                      ref_a, ref_b, m_var, ms);            \
  }
      variant("regs4", NZ(4, 0));
      variant("regs2", NZ(2, 0));
      variant("smem4", NZ(4, 1));
      variant("fold4", NZ(4, 2));
      variant("fold2", NZ(2, 2));
#undef NZ
      for (void* p : {(void*)y_lib, (void*)y_var, (void*)m_lib, (void*)m_var, (void*)bias})
        HG_GPU_CHECK(gpuFree(p));
    }

    // ---- gradient sums (ReLU mask, no dz)
    const int64_t mstride = relu_mask_stride(c);
    auto sums_lib = [&](float* dw, float* db) {
      batch_norm_grad_sums_kernel<T, 8, true><<<grid_of(plan), block, 0, s>>>(
          dy, x, sh.rows, c, plan.rows_per_block, ref_a, invstd, dw, db, w.part_a, w.part_b,
          w.counters, mask, mstride);
    };
    float *sref_a, *sref_b;
    HG_GPU_CHECK(gpuMalloc(&sref_a, c * 4));
    HG_GPU_CHECK(gpuMalloc(&sref_b, c * 4));
    sums_lib(sref_a, sref_b);
    HG_GPU_CHECK(gpuStreamSynchronize(s));
    const double sums_tensors = 2.0 + 1.0 / 16.0;
    row("sums", "lib", time_us(s, repeats, [&] { sums_lib(sref_a, sref_b); }), sums_tensors, "-");
    auto sums_variant = [&](const char* name, auto launch, bool full) {
      launch();
      HG_GPU_CHECK(gpuStreamSynchronize(s));
      std::string check = "-";
      if (full) {
        check = compare(sref_a, out_a, size_t(c)) + "/" + compare(sref_b, out_b, size_t(c));
        ok &= check.find("NAN") == std::string::npos;
      }
      row("sums", name, time_us(s, repeats, launch), sums_tensors, check);
    };
#define SUMS(STOP, TAIL, P)                                                                  \
  [&] {                                                                                      \
    grad_sums_x<STOP, TAIL><<<grid_of(P), block, 0, s>>>(dy, x, sh.rows, c, P.rows_per_block, \
                                                         ref_a, invstd, out_a, out_b, w,      \
                                                         mask, mstride);                      \
  }
    sums_variant("flat4", SUMS(kFull, kFlat4, plan), true);
    sums_variant("stop_loop_live", SUMS(kStopLoopLive, kFlat4, plan), false);
    sums_variant("stop_partial", SUMS(kStopPartial, kFlat4, plan), false);
    sums_variant("stop_ticket", SUMS(kStopTicket, kFlat4, plan), false);
    sums_variant("vec4", SUMS(kFull, kVec4, plan), true);
    auto sums_finish = [&](dim3 fb) {
      finish_kernel<false><<<unsigned(ceil_div(c, fb.x)), fb, 0, s>>>(
          w.part_a, w.part_b, plan.row_blocks, sh.rows, plan.rows_per_block, c, x, nullptr,
          nullptr, 0.0, 0.0, out_a, out_b, invstd);
    };
    sums_variant("kernel", [&] { SUMS(kFull, kKernel, plan)(); sums_finish(dim3(32, 16)); }, true);
    sums_variant("kernel8", [&] { SUMS(kFull, kKernel, plan)(); sums_finish(dim3(8, 64)); },
                 true);
#undef SUMS
    HG_GPU_CHECK(gpuStreamSynchronize(s));
    for (void* p : {(void*)x, (void*)dy, (void*)mask, (void*)scratch_copy, (void*)rm, (void*)rv,
                    (void*)ref_a, (void*)ref_b, (void*)out_a, (void*)out_b, (void*)invstd,
                    (void*)sref_a, (void*)sref_b, (void*)w.part_a, (void*)w.part_b,
                    (void*)w.group_a, (void*)w.group_b, (void*)w.counters,
                    (void*)w.group_counters, (void*)lib_ws})
      HG_GPU_CHECK(gpuFree(p));
  }
  std::printf("checks,%s\n", ok ? "no NaN" : "NaN seen");
  return ok ? 0 : 1;
}
