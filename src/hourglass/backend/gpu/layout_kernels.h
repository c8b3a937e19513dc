// Launchers of the layout kernels (layout_kernels.cu): moving a batch of [rows, cols] matrices
// to [cols, rows], which turns channels-last tensors [N, H*W, C] into channels-first
// [N, C, H*W] (rows = H*W, cols = C) and back (rows = C, cols = H*W). dnn_cudnn.cpp uses them
// to run the convolution engines that cuDNN offers only for NCHW f32 tensors.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// out[b, j, i] = in[b, i, j] for contiguous in [batch, rows, cols] and out [batch, cols, rows]
// of one dtype (f32, bf16 or f16); in and out must not overlap.
void launch_batched_transpose(const void* in, void* out, int64_t batch, int64_t rows, int64_t cols,
                              DType dtype, gpuStream_t stream);

}  // namespace hg::gpu
