// Per-row kernels: log_softmax and its backward take one warp per row (kWarp lanes stride over
// the columns, the row's max and sums by warp shuffles, the warps of the grid stepping over the
// rows as in cross_entropy_kernels.cu); gather_columns takes a thread per row and its backward
// a thread per element.
#include <cmath>
#include <cstdint>

#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/gpu/row_ops_kernels.h"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    log_softmax_rows(const T* __restrict__ x, int64_t rows, int64_t columns, T* __restrict__ y) {
  const int lane = threadIdx.x % kWarp;
  const int64_t rows_per_block = kThreads / kWarp;
  for (int64_t r = int64_t(blockIdx.x) * rows_per_block + threadIdx.x / kWarp; r < rows;
       r += int64_t(gridDim.x) * rows_per_block) {
    const T* xr = x + r * columns;
    T* yr = y + r * columns;
    float mx = -INFINITY;
    for (int64_t j = lane; j < columns; j += kWarp) mx = fmaxf(mx, to_float(xr[j]));
    mx = warp_max(mx);
    float sum_exp = 0.0f;
    for (int64_t j = lane; j < columns; j += kWarp) sum_exp += expf(to_float(xr[j]) - mx);
    const float log_sum = logf(warp_sum(sum_exp));
    for (int64_t j = lane; j < columns; j += kWarp)
      yr[j] = from_float<T>((to_float(xr[j]) - mx) - log_sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    log_softmax_grad_rows(const T* __restrict__ dy, const T* __restrict__ y, int64_t rows,
                          int64_t columns, T* __restrict__ dx) {
  const int lane = threadIdx.x % kWarp;
  const int64_t rows_per_block = kThreads / kWarp;
  for (int64_t r = int64_t(blockIdx.x) * rows_per_block + threadIdx.x / kWarp; r < rows;
       r += int64_t(gridDim.x) * rows_per_block) {
    const int64_t base = r * columns;
    float sum = 0.0f;
    for (int64_t j = lane; j < columns; j += kWarp) sum += to_float(dy[base + j]);
    sum = warp_sum(sum);
    for (int64_t j = lane; j < columns; j += kWarp)
      dx[base + j] = from_float<T>(to_float(dy[base + j]) - expf(to_float(y[base + j])) * sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gather_columns_rows(const T* __restrict__ x, const int64_t* __restrict__ index, int64_t rows,
                        int64_t columns, T* __restrict__ out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    const int64_t j = index[r];
    out[r] = j >= 0 && j < columns ? x[r * columns + j] : from_float<T>(NAN);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    gather_columns_grad(const T* __restrict__ dy, const int64_t* __restrict__ index, int64_t rows,
                        int64_t columns, T* __restrict__ dx) {
  const int64_t n = rows * columns;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / columns, j = i - r * columns;
    const int64_t k = index[r];
    const bool in_range = k >= 0 && k < columns;
    dx[i] = !in_range ? from_float<T>(NAN) : (j == k ? dy[r] : from_float<T>(0.0f));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    scale_rows_kernel(const T* __restrict__ x, const float* __restrict__ scale, int64_t rows,
                      int64_t columns, T* __restrict__ y) {
  const int64_t n = rows * columns;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = from_float<T>(__fmul_rn(to_float(x[i]), scale[i / columns]));
}

}  // namespace

void launch_log_softmax(const void* x, int64_t rows, int64_t columns, DType dtype, void* y,
                        gpuStream_t stream) {
  if (rows <= 0 || columns <= 0) return;
  dispatch_float("log_softmax", dtype, [&]<typename T>() {
    log_softmax_rows<T><<<warp_per_row_blocks(rows, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), rows, columns, static_cast<T*>(y));
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_log_softmax_backward(const void* dy, const void* y, int64_t rows, int64_t columns,
                                 DType dtype, void* dx, gpuStream_t stream) {
  if (rows <= 0 || columns <= 0) return;
  dispatch_float("log_softmax_backward", dtype, [&]<typename T>() {
    log_softmax_grad_rows<T><<<warp_per_row_blocks(rows, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(y), rows, columns, static_cast<T*>(dx));
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_scale_rows(const void* x, const float* scale, int64_t rows, int64_t columns,
                       DType dtype, void* y, gpuStream_t stream) {
  const int64_t n = rows * columns;
  if (n <= 0) return;
  dispatch_float("scale_rows", dtype, [&]<typename T>() {
    scale_rows_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), scale, rows, columns, static_cast<T*>(y));
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_gather_columns(const void* x, const int64_t* index, int64_t rows, int64_t columns,
                           DType dtype, void* out, gpuStream_t stream) {
  if (rows <= 0) return;
  dispatch_float("gather_columns", dtype, [&]<typename T>() {
    gather_columns_rows<T><<<grid_for(rows, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), index, rows, columns, static_cast<T*>(out));
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_gather_columns_backward(const void* dy, const int64_t* index, int64_t rows,
                                    int64_t columns, DType dtype, void* dx, gpuStream_t stream) {
  const int64_t n = rows * columns;
  if (n <= 0) return;
  dispatch_float("gather_columns_backward", dtype, [&]<typename T>() {
    gather_columns_grad<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), index, rows, columns, static_cast<T*>(dx));
  });
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
