// Launcher of global-norm gradient clipping (clip_kernels.cu), called by clip.cpp.
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// torch.nn.utils.clip_grad_norm_ with the CPU backend's arithmetic (backend/cpu/clip.cpp):
// every thread computes norm = sqrt(double(*sum_squares)) and coef = max_norm / (norm + 1e-6)
// in double; when the norm is finite and coef < 1, grads[i] *= float(coef) over the n
// contiguous f32 gradients. The first thread stores float(norm) to *norm. One launch, also for
// n = 0 (the norm is still written); nothing is read back.
void launch_clip_grads(float* grads, int64_t n, const float* sum_squares, double max_norm,
                       float* norm, gpuStream_t stream);

}  // namespace hg::gpu
