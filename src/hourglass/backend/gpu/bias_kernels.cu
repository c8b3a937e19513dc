// Bias kernels over a row-major [rows, cols] view (bias_kernels.h).
//
// Bias gradient, deterministic without atomics: the rows are cut into `chunks` slices of a
// length that depends on `rows` only; block (x, y) sums a tile of kColTile columns over slice
// y with kRowLanes threads per column (each adding every kRowLanes-th row of the slice in
// order), adds its lanes in a fixed order and writes one partial per column; a second kernel
// adds the partials of each column in slice order. Adjacent threads read adjacent columns, so
// every row segment is read coalesced.
#include <cstdint>

#include "hourglass/backend/gpu/bias_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kColTile = 32;                    // columns per block
constexpr int kRowLanes = 8;                    // threads per column
constexpr int kThreads = kColTile * kRowLanes;  // 256: whole warps at any width (32, 64)
constexpr int64_t kMaxChunks = 256;             // row slices at most (partials per column)
constexpr int64_t kMinRowsPerChunk = 64;

int64_t rows_per_chunk(int64_t rows) {
  const int64_t even = (rows + kMaxChunks - 1) / kMaxChunks;
  return even > kMinRowsPerChunk ? even : kMinRowsPerChunk;
}

int64_t chunk_count(int64_t rows) {
  const int64_t per = rows_per_chunk(rows);
  const int64_t chunks = (rows + per - 1) / per;
  return chunks < 1 ? 1 : chunks;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    column_partials(const T* __restrict__ dy, int64_t rows, int64_t cols, int64_t per_chunk,
                    float* __restrict__ partials) {
  __shared__ float scratch[kRowLanes][kColTile + 1];
  const int lane_c = int(threadIdx.x) % kColTile;
  const int lane_r = int(threadIdx.x) / kColTile;
  const int64_t col = int64_t(blockIdx.x) * kColTile + lane_c;
  const int64_t r0 = int64_t(blockIdx.y) * per_chunk;
  const int64_t r1 = r0 + per_chunk < rows ? r0 + per_chunk : rows;
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  if (col < cols) {
    int64_t r = r0 + lane_r;
    for (; r + 3 * kRowLanes < r1; r += 4 * kRowLanes) {
      a0 += to_float(dy[r * cols + col]);
      a1 += to_float(dy[(r + kRowLanes) * cols + col]);
      a2 += to_float(dy[(r + 2 * kRowLanes) * cols + col]);
      a3 += to_float(dy[(r + 3 * kRowLanes) * cols + col]);
    }
    for (; r < r1; r += kRowLanes) a0 += to_float(dy[r * cols + col]);
  }
  scratch[lane_r][lane_c] = (a0 + a1) + (a2 + a3);
  __syncthreads();
  if (lane_r == 0 && col < cols) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowLanes; ++i) sum += scratch[i][lane_c];
    partials[int64_t(blockIdx.y) * cols + col] = sum;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    column_finish(const float* __restrict__ partials, int64_t chunks, int64_t cols,
                  T* __restrict__ out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += stride) {
    float sum = 0.0f;
    for (int64_t i = 0; i < chunks; ++i) sum += partials[i * cols + col];
    out[col] = from_float<T>(sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_bias_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t n, int64_t cols) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = from_float<T>(to_float(y[i]) + to_float(bias[i % cols]));
}

}  // namespace

void launch_add_bias(void* y, const void* bias, int64_t rows, int64_t cols, DType dtype,
                     gpuStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  dispatch_float("add_bias", dtype, [&]<typename T>() {
    add_bias_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), n, cols);
    HG_GPU_CHECK_LAUNCH();
  });
}

int64_t bias_grad_partials(int64_t rows, int64_t cols) { return chunk_count(rows) * cols; }

void launch_bias_grad(const void* dy, int64_t rows, int64_t cols, DType dtype, float* partials,
                      void* dbias, gpuStream_t stream) {
  if (cols == 0) return;
  const int64_t chunks = chunk_count(rows);
  const int64_t per = rows_per_chunk(rows);
  dispatch_float("bias_grad", dtype, [&]<typename T>() {
    const dim3 grid(unsigned((cols + kColTile - 1) / kColTile), unsigned(chunks));
    column_partials<T>
        <<<grid, kThreads, 0, stream>>>(static_cast<const T*>(dy), rows, cols, per, partials);
    HG_GPU_CHECK_LAUNCH();
    column_finish<T><<<grid_for(cols, kThreads), kThreads, 0, stream>>>(partials, chunks, cols,
                                                                        static_cast<T*>(dbias));
    HG_GPU_CHECK_LAUNCH();
  });
}

}  // namespace hg::gpu
