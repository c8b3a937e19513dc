// What the batch-norm kernel files (batch_norm_kernels.cu, batch_norm_pair_kernels.cu) share:
// the block shape and grid constants, vector loads and stores, the Welford and sum merges, the
// column reduction with its last-block finish, the statistics' two kernels and their launch,
// and the host-side dispatch on the vector width. batch_norm_kernels.h describes the scheme.
// Included only by .cu files (compiled by nvcc or hipcc).
#pragma once

#include <cstdint>

#include "hourglass/backend/gpu/batch_norm_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {
namespace bn {

constexpr int kThreads = 512;  // threads per block (block_x * block_y)
// Rows a thread loads before using any (memory parallelism): 64 bytes in flight per thread
// and kernel, at most 4 rows (registers).
// clang-format off (it reads the comparisons as template brackets)
template <typename T, int V, int kInputs>
inline constexpr int kRowsPerStep =
    64 / (kInputs * V * int(sizeof(T)))<1 ? 1 : 64 / (kInputs * V * int(sizeof(T)))> 4
        ? 4
        : 64 / (kInputs * V * int(sizeof(T)));
// clang-format on
constexpr int kMinRowsPerThread = 4;  // the grids give every thread at least this many rows
constexpr int kMaxBlockX = 16;        // at most 16 vectors (128 bf16 / 64 f32 channels) a column
// Blocks per multiprocessor the grids aim at: one wave of two 512-thread blocks, which keeps
// the partials few (the last block merges them all) and lets every kernel share one partition
// of the rows (see batch_norm_normalize_kernel).
constexpr int64_t kBlocksPerSm = 2;
constexpr int64_t kMaxGridY = 65535;
// Per-channel coefficients of a block's channels (at most kMaxBlockX vectors of 8) kept in
// shared memory and read per row, a broadcast across the threads of one channel vector: in
// registers, beside the rows in flight, they exceed the 64 a thread and spill (the fused
// forward's normalising pass ran 1.2-1.3x slower so, bench/README.md).
constexpr int kCoefWidth = kMaxBlockX * 8;
// Partials the last block of a column loads at once per lane before merging them.
constexpr int kTailBatch = 4;

// Registers: two blocks a multiprocessor (64 a thread on NVIDIA). HIP's second argument means
// something else (waves per execution unit), so it gets only the block size.
#ifdef HOURGLASS_GPU_HIP
#define HG_BN_LAUNCH_BOUNDS __launch_bounds__(kThreads)
#else
#define HG_BN_LAUNCH_BOUNDS __launch_bounds__(kThreads, 2)
#endif

// ---- loads and stores of `V` consecutive channels

// Loads stay packed (16-bit values two to a register) until used.
template <typename T, int V>
__device__ inline Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}

template <typename T, int V>
__device__ inline void store_row(T* p, const float (&in)[V]) {
  Pack<T, V> pack;
#pragma unroll
  for (int i = 0; i < V; ++i) pack.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<Pack<T, V>*>(p) = pack;
}

// V floats from shared memory at a multiple of V (16-byte reads where V allows).
template <int V>
__device__ inline void load_shared(const float* p, float (&out)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int i = 0; i < V; i += 4) {
      const float4 q = *reinterpret_cast<const float4*>(p + i);
      out[i] = q.x;
      out[i + 1] = q.y;
      out[i + 2] = q.z;
      out[i + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = p[i];
  }
}

// A partial written by another block (of this kernel or an earlier one): read past the
// (non-coherent) L1.
__device__ inline float load_partial(const float* p) {
  return *static_cast<const volatile float*>(p);
}

// ---- merges

__device__ inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// How many of the integers [0, len) are congruent to l modulo 2^shift (l < 2^shift).
__device__ inline float congruent_count(int64_t len, int shift, int64_t l) {
  return l < len ? float(((len - 1 - l) >> shift) + 1) : 0.0f;
}

// Chan's merge of (nb, mean_b, m2_b) into (na, mean_a, m2_a); the caller adds the counts.
struct WelfordMerge {
  __device__ void operator()(float na, float& mean_a, float& m2_a, float nb, float mean_b,
                             float m2_b) const {
    const float n = na + nb;
    const float wb = n > 0.0f ? nb / n : 0.0f;
    const float delta = mean_b - mean_a;
    mean_a += delta * wb;
    m2_a += m2_b + delta * (delta * (na * wb));  // na * wb = 0 for an empty a
  }
};

// Plain sums of two quantities (counts unused).
struct SumMerge {
  __device__ void operator()(float, float& a, float& b, float, float a2, float b2) const {
    a += a2;
    b += b2;
  }
};

// Rows covered by the partials p < blocks with p = l modulo 2^shift (every block has
// rows_per_block rows, the last one last_rows).
__device__ inline float partial_rows(int64_t blocks, int64_t rows_per_block, int64_t last_rows,
                                     int shift, int64_t l) {
  float n = congruent_count(blocks, shift, l) * float(rows_per_block);
  if (((blocks - 1) & ((int64_t(1) << shift) - 1)) == l) n -= float(rows_per_block - last_rows);
  return n;
}

__device__ inline int log2_of(int power_of_two) { return __ffs(power_of_two) - 1; }

// The reduction tail shared by statistics and gradient sums. On entry every thread has stored
// its V pairs (a, b) at s_a/s_b[threadIdx.y * W + threadIdx.x * V + i] (W = blockDim.x * V
// channels in this column); thread y covered the rows of its block at offsets = y modulo
// blockDim.y. Merges them over the block, writes the block's partial [blockIdx.y][channel],
// and returns false, except in the last block of the column to get there, which merges every
// block's partial and returns true with channel column*W + c's result in s_a[c], s_b[c]
// (c < W). Contains barriers: call from every thread.
// Lane `lane` of `lanes` merges the partials lane, lane + lanes, ... < blocks of channel c
// (partial p at part_a/part_b[p * channels + c], rows_per_block rows each, the last
// last_rows) into (n, a, b), in order: kBatch loaded before any is merged, so their latencies
// overlap and the bits are those of merging one at a time.
template <int kBatch, typename Merge>
__device__ inline void merge_partials(const Merge& merge, const float* part_a, const float* part_b,
                                      int64_t channels, int64_t c, int64_t blocks,
                                      int64_t rows_per_block, int64_t last_rows, int lane,
                                      int lanes, float& n, float& a, float& b) {
  for (int64_t p0 = lane; p0 < blocks; p0 += int64_t(kBatch) * lanes) {
    float pa[kBatch], pb[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int64_t p = p0 + int64_t(k) * lanes;
      if (p < blocks) {
        pa[k] = load_partial(part_a + p * channels + c);
        pb[k] = load_partial(part_b + p * channels + c);
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int64_t p = p0 + int64_t(k) * lanes;
      if (p < blocks) {
        const float np = p == blocks - 1 ? float(last_rows) : float(rows_per_block);
        merge(n, a, b, np, pa[k], pb[k]);
        n += np;
      }
    }
  }
}

// The block's part of reduce_column below: merges the block's lanes and writes its partial
// [blockIdx.y][channel]. Contains barriers: call from every thread.
template <int V, typename Merge>
__device__ inline void reduce_block(float* s_a, float* s_b, const Merge& merge, int64_t rows,
                                    int64_t channels, int64_t rows_per_block, float* part_a,
                                    float* part_b) {
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int64_t column = blockIdx.x, block = blockIdx.y;
  const int64_t len = min64(rows_per_block, rows - block * rows_per_block);
  __syncthreads();
  // Tree over the block's row lanes: before the step of stride s, lane l holds the offsets
  // = l modulo 2s (2^shift); after it, those = l modulo s.
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
      part_a[block * channels + c] = s_a[e];
      part_b[block * channels + c] = s_b[e];
    }
  }
}

template <int V, typename Merge>
__device__ inline bool reduce_column(float* s_a, float* s_b, unsigned* s_ticket, const Merge& merge,
                                     int64_t rows, int64_t channels, int64_t rows_per_block,
                                     float* part_a, float* part_b, unsigned* counters) {
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int64_t column = blockIdx.x, blocks = gridDim.y;
  reduce_block<V>(s_a, s_b, merge, rows, channels, rows_per_block, part_a, part_b);
  // Last block done: publish the partial, take a ticket; the last ticket merges.
  __threadfence();
  __syncthreads();
  if (t == 0) *s_ticket = atomicAdd(&counters[column], 1u);
  __syncthreads();
  if (*s_ticket != unsigned(blocks - 1)) return false;
  __threadfence();
  if (t == 0) counters[column] = 0u;  // ready for the next kernel, no memset needed

  // kThreads / width lanes per channel; lane l merges partials l, l + lanes, ... in order,
  // then a tree over the lanes as above.
  const int lanes = kThreads / width;
  const int64_t last_rows = rows - (blocks - 1) * rows_per_block;
  {
    const int l = t / width;
    const int64_t c = column * width + t % width;
    float n = 0.0f, a = 0.0f, b = 0.0f;
    if (c < channels)
      merge_partials<kTailBatch>(merge, part_a, part_b, channels, c, blocks, rows_per_block,
                                 last_rows, l, lanes, n, a, b);
    s_a[t] = a;
    s_b[t] = b;
  }
  __syncthreads();
  for (int s = lanes / 2, shift = log2_of(lanes); s >= 1; s >>= 1, --shift) {
    if (t < s * width) {
      const int l = t / width;
      merge(partial_rows(blocks, rows_per_block, last_rows, shift, l), s_a[t], s_b[t],
            partial_rows(blocks, rows_per_block, last_rows, shift, l + s), s_a[t + s * width],
            s_b[t + s * width]);
    }
    __syncthreads();
  }
  return true;
}

// ---- kernels. Grid (columns, row blocks), block (block_x, block_y) = kThreads threads;
// thread (x, y) of block (i, j) owns channels [(i * block_x + x) * V, + V) and the rows
// j * rows_per_block + y + k * block_y of its block.

// Batch statistics, first pass: each block's (mean of x - shift, M2) per channel, shift = the
// channel's value in row 0, written to part_mean / part_m2 [blockIdx.y][channel]; the
// finishing kernel below merges them. A thread sums d = x - (its own first value) and d^2 (no
// division a row), then turns them into its (mean, M2): its M2 = s2 - s1^2 / n cancels at most
// by a factor of its row count n, since its shift is one of its values. The blocks' lanes then
// merge with Chan's formula. Relative to the row-0 shift, inputs whose mean is large against
// their spread keep their small differences exact (Sterbenz).
template <typename T, int V>
__global__ void HG_BN_LAUNCH_BOUNDS batch_norm_stats_kernel(const T* __restrict__ x, int64_t rows,
                                                            int64_t channels,
                                                            int64_t rows_per_block,
                                                            float* part_mean, float* part_m2) {
  constexpr int kRows = kRowsPerStep<T, V, 1>;
  __shared__ float s_mean[kThreads * V];
  __shared__ float s_m2[kThreads * V];
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  float mean[V], m2[V];
#pragma unroll
  for (int i = 0; i < V; ++i) mean[i] = m2[i] = 0.0f;
  if (vector * V < channels && ty < len) {
    const int64_t step = int64_t(by) * channels;
    const T* p = x + (first + ty) * channels + vector * V;
    const Pack<T, V> row0 = load_pack<T, V>(x + vector * V);
    const Pack<T, V> own = load_pack<T, V>(p);
    float n = 0.0f, shift[V], s1[V], s2[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      shift[i] = to_float(own.v[i]);
      s1[i] = s2[i] = 0.0f;
    }
    for (int64_t o = ty; o < len; o += by * kRows, p += kRows * step) {
      Pack<T, V> xs[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k)
        if (o + k * by < len) xs[k] = load_pack<T, V>(p + k * step);
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          n += 1.0f;
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float d = to_float(xs[k].v[i]) - shift[i];
            s1[i] += d;
            s2[i] = __fmaf_rn(d, d, s2[i]);
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float md = s1[i] / n;
      mean[i] = (shift[i] - to_float(row0.v[i])) + md;
      m2[i] = fmaxf(0.0f, s2[i] - s1[i] * md);
    }
  }
  const int e = ty * int(blockDim.x) * V + int(threadIdx.x) * V;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    s_mean[e + i] = mean[i];
    s_m2[e + i] = m2[i];
  }
  reduce_block<V>(s_mean, s_m2, WelfordMerge{}, rows, channels, rows_per_block, part_mean, part_m2);
}

// Threads of the finishing kernel: kFinishChannels channels of kFinishLanes lanes each.
constexpr int kFinishChannels = 8;
constexpr int kFinishLanes = 64;

// Batch statistics, second pass: lane l of channel c merges the partials l, l + kFinishLanes,
// ... in order (eight loaded before any is merged), then a tree over the lanes; writes mean,
// invstd and the running statistics. Spread over channels, it reads the partials far faster
// than one block of the first pass could (bench/README.md, eighth session).
template <typename T>
__global__ void __launch_bounds__(kFinishChannels* kFinishLanes)
    batch_norm_stats_finish_kernel(const T* __restrict__ x, int64_t rows, int64_t channels,
                                   int64_t rows_per_block, int64_t blocks, const float* part_mean,
                                   const float* part_m2, float* running_mean, float* running_var,
                                   double momentum, double eps, float* save_mean,
                                   float* save_invstd) {
  constexpr int kBatch = 8;
  __shared__ float s_n[kFinishLanes][kFinishChannels];
  __shared__ float s_mean[kFinishLanes][kFinishChannels];
  __shared__ float s_m2[kFinishLanes][kFinishChannels];
  const int tx = int(threadIdx.x), lane = int(threadIdx.y);
  const int64_t c = int64_t(blockIdx.x) * kFinishChannels + tx;
  const int64_t last_rows = rows - (blocks - 1) * rows_per_block;
  const WelfordMerge merge;
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  if (c < channels)
    merge_partials<kBatch>(merge, part_mean, part_m2, channels, c, blocks, rows_per_block,
                           last_rows, lane, kFinishLanes, n, mean, m2);
  s_n[lane][tx] = n;
  s_mean[lane][tx] = mean;
  s_m2[lane][tx] = m2;
  __syncthreads();
  for (int s = kFinishLanes / 2; s >= 1; s >>= 1) {
    if (lane < s) {
      merge(s_n[lane][tx], s_mean[lane][tx], s_m2[lane][tx], s_n[lane + s][tx],
            s_mean[lane + s][tx], s_m2[lane + s][tx]);
      s_n[lane][tx] += s_n[lane + s][tx];
    }
    __syncthreads();
  }
  if (lane == 0 && c < channels) {
    const double count = double(rows);
    const double m = double(to_float(x[c])) + double(s_mean[0][tx]);  // shift + mean of x - shift
    const double var = fmax(0.0, double(s_m2[0][tx]) / count);        // biased, for normalising
    save_mean[c] = float(m);
    save_invstd[c] = float(1.0 / sqrt(var + eps));
    // PyTorch: running = (1 - momentum) * running + momentum * batch, unbiased variance.
    const double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
    running_mean[c] = float((1.0 - momentum) * double(running_mean[c]) + momentum * m);
    running_var[c] = float((1.0 - momentum) * double(running_var[c]) + momentum * unbiased);
  }
}

// How many steps of `stride` rows from offset `start` stay below len.
__device__ inline int64_t steps_of(int64_t len, int64_t start, int64_t stride) {
  return start < len ? (len - 1 - start) / stride + 1 : 0;
}

// The `V` mask bits of the thread owning channels [vector * V, + V) in a row's mask bytes
// (V divides 8, so they never straddle two bytes): bit i for channel vector * V + i.
template <int V>
__device__ inline unsigned mask_bits(const uint8_t* row_mask, int64_t vector) {
  return unsigned(row_mask[(vector * V) / 8]) >> ((vector * V) % 8);
}

// ---- host side

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls body.template operator()<V>() for the plan's vector width (8 only for 16-bit types).
template <typename T, typename Body>
void dispatch_vec(const char* op, DType dtype, int vec, Body&& body) {
  switch (vec) {
    case 1: return body.template operator()<1>();
    case 2: return body.template operator()<2>();
    case 4: return body.template operator()<4>();
    case 8:
      if constexpr (sizeof(T) == 2) return body.template operator()<8>();
      break;
    default: break;
  }
  unsupported_dtype(op, dtype);  // batch_norm_plan never picks another width for this type
}

inline dim3 block_of(const BatchNormPlan& p) {
  return dim3(unsigned(p.block_x), unsigned(p.block_y));
}

// The batch statistics of x [rows > 0, channels] (both passes above): save_mean, save_invstd
// written, the running statistics updated. `workspace`: batch_norm_workspace_floats.
template <typename T, int V>
void launch_batch_norm_stats(const BatchNormPlan& plan, const T* x, int64_t rows, int64_t channels,
                             float* running_mean, float* running_var, double momentum, double eps,
                             float* save_mean, float* save_invstd, float* workspace,
                             gpuStream_t stream) {
  float* part_m2 = workspace + plan.row_blocks * channels;
  batch_norm_stats_kernel<T, V>
      <<<dim3(unsigned(plan.columns), unsigned(plan.row_blocks)), block_of(plan), 0, stream>>>(
          x, rows, channels, plan.rows_per_block, workspace, part_m2);
  HG_GPU_CHECK_LAUNCH();
  batch_norm_stats_finish_kernel<T>
      <<<unsigned(ceil_div(channels, kFinishChannels)), dim3(kFinishChannels, kFinishLanes), 0,
         stream>>>(x, rows, channels, plan.rows_per_block, plan.row_blocks, workspace, part_m2,
                   running_mean, running_var, momentum, eps, save_mean, save_invstd);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace bn
}  // namespace hg::gpu
