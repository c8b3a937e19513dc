// Launchers of the per-row kernels (row_ops_kernels.cu), called by row_ops.cpp. Matrices are
// [rows, columns] contiguous in `dtype` (f32, bf16 or f16), computed in float; index is i64
// [rows]. An index outside [0, columns) cannot throw here (that would wait for the device): the
// row's gathered value, or its row of the gradient, is NaN instead.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// y[r, j] = (x[r, j] - max_r) - log(sum_k exp(x[r, k] - max_r)).
void launch_log_softmax(const void* x, int64_t rows, int64_t columns, DType dtype, void* y,
                        gpuStream_t stream);
// dx[r, j] = dy[r, j] - exp(y[r, j]) * sum_k dy[r, k].
void launch_log_softmax_backward(const void* dy, const void* y, int64_t rows, int64_t columns,
                                 DType dtype, void* dx, gpuStream_t stream);
// y[r, j] = x[r, j] * scale[r] (scale f32 on the device), for `columns` elements per row.
void launch_scale_rows(const void* x, const float* scale, int64_t rows, int64_t columns,
                       DType dtype, void* y, gpuStream_t stream);
// out[r] = x[r, index[r]].
void launch_gather_columns(const void* x, const int64_t* index, int64_t rows, int64_t columns,
                           DType dtype, void* out, gpuStream_t stream);
// dx[r, j] = j == index[r] ? dy[r] : 0.
void launch_gather_columns_backward(const void* dy, const int64_t* index, int64_t rows,
                                    int64_t columns, DType dtype, void* dx, gpuStream_t stream);

}  // namespace hg::gpu
