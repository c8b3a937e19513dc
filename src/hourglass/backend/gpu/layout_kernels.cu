// Batched matrix transpose (layout_kernels.h): a block moves one kTile x kTile tile of one
// matrix through shared memory (one padding column against bank conflicts), reading rows and
// writing columns of the tile both coalesced.
#include <cstdint>

#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/gpu/layout_kernels.h"

namespace hg::gpu {

namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;                 // each thread moves kTile / kRowsPerPass values
constexpr int kThreads = kTile * kRowsPerPass;  // 256

template <typename T>
__global__ void __launch_bounds__(kThreads)
    batched_transpose_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows,
                             int64_t cols, int64_t first_row_tile) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t matrix = int64_t(blockIdx.z) * rows * cols;
  const int64_t row0 = (first_row_tile + int64_t(blockIdx.y)) * kTile;
  const int64_t col0 = int64_t(blockIdx.x) * kTile;
  const int tx = int(threadIdx.x) % kTile;
  const int ty = int(threadIdx.x) / kTile;
  for (int r = ty; r < kTile; r += kRowsPerPass) {
    const int64_t row = row0 + r, col = col0 + tx;
    if (row < rows && col < cols) tile[r][tx] = in[matrix + row * cols + col];
  }
  __syncthreads();
  // out is [cols, rows]: its row is an input column, its column an input row.
  for (int c = ty; c < kTile; c += kRowsPerPass) {
    const int64_t out_row = col0 + c, out_col = row0 + tx;
    if (out_row < cols && out_col < rows) out[matrix + out_row * rows + out_col] = tile[tx][c];
  }
}

}  // namespace

void launch_batched_transpose(const void* in, void* out, int64_t batch, int64_t rows, int64_t cols,
                              DType dtype, gpuStream_t stream) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  // Grids hold at most 65535 blocks in y and z: larger batches and taller matrices go in parts.
  constexpr int64_t kMaxGrid = 65535;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const unsigned col_tiles = unsigned((cols + kTile - 1) / kTile);
  const size_t matrix_bytes = size_t(rows * cols) * dtype_size(dtype);
  dispatch_float("batched_transpose", dtype, [&]<typename T>() {
    for (int64_t b0 = 0; b0 < batch; b0 += kMaxGrid) {
      const int64_t nb = batch - b0 < kMaxGrid ? batch - b0 : kMaxGrid;
      const T* src = reinterpret_cast<const T*>(static_cast<const char*>(in) + b0 * matrix_bytes);
      T* dst = reinterpret_cast<T*>(static_cast<char*>(out) + b0 * matrix_bytes);
      for (int64_t t0 = 0; t0 < row_tiles; t0 += kMaxGrid) {
        const int64_t nt = row_tiles - t0 < kMaxGrid ? row_tiles - t0 : kMaxGrid;
        const dim3 grid(col_tiles, unsigned(nt), unsigned(nb));
        batched_transpose_kernel<T><<<grid, kThreads, 0, stream>>>(src, dst, rows, cols, t0);
        HG_GPU_CHECK_LAUNCH();
      }
    }
  });
}

}  // namespace hg::gpu
