// Launchers of the bias kernels (bias_kernels.cu), shared by conv2d.cpp and linear.cpp: adding
// a bias along the last dimension and its gradient (column sums). Both work on a row-major
// [rows, cols] view: NHWC activations are [N*P*Q, K], linear outputs [N, out].
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// y[i, j] += bias[j] in place, for contiguous y [rows, cols] and bias [cols] of one dtype
// (f32, bf16 or f16), computed in f32.
void launch_add_bias(void* y, const void* bias, int64_t rows, int64_t cols, DType dtype,
                     gpuStream_t stream);

// How many f32 partial sums launch_bias_grad needs as scratch for a [rows, cols] input.
// Depends on the shape only, never on the device, so the order of additions, hence every bit
// of the result, is the same on every GPU and every run.
int64_t bias_grad_partials(int64_t rows, int64_t cols);

// dbias[j] = sum_i dy[i, j] for contiguous dy [rows, cols], accumulated in f32 by a fixed
// partition (no atomics), stored in dy's dtype. `partials` is device scratch of
// bias_grad_partials(rows, cols) floats. rows = 0 writes zeros; cols must be > 0.
void launch_bias_grad(const void* dy, int64_t rows, int64_t cols, DType dtype, float* partials,
                      void* dbias, gpuStream_t stream);

}  // namespace hg::gpu
