// Launchers of the softmax cross-entropy kernels (cross_entropy_kernels.cu), called by
// cross_entropy.cpp. logits / probs / dlogits are [rows, classes] contiguous in `dtype` (f32,
// bf16 or f16), computed in float; labels are i64 [rows]; scalars are f32 on the device.
//
// A label outside [0, classes) cannot throw here (that would need a host sync): its row's loss,
// its row of dlogits and its row's hit are NaN, so the loss, the gradients and the correct
// count all show it.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// probs = softmax(logits) (dtype of logits); row_loss[r] = -(on * log p[r, label] +
// uniform * sum_j log p[r, j]) (f32 scratch [rows]); loss[0] = mean of row_loss.
// rows >= 1, classes >= 1.
void launch_cross_entropy(const void* logits, const int64_t* labels, int64_t rows, int64_t classes,
                          float on, float uniform, DType dtype, void* probs, float* row_loss,
                          float* loss, gpuStream_t stream);

// dlogits[r, j] = (dloss[0] / rows) * (probs[r, j] - t) with t = t_on at the label, t_off
// elsewhere. dloss is read on the device. Nothing is launched when rows * classes is 0.
void launch_cross_entropy_backward(const float* dloss, const void* probs, const int64_t* labels,
                                   int64_t rows, int64_t classes, float t_off, float t_on,
                                   DType dtype, void* dlogits, gpuStream_t stream);

// out[0] = number of rows whose label ranks among the k highest logits (ops::count_correct's
// ranking, as the CPU); row_hit is f32 scratch [rows]. rows = 0 writes 0. classes < 2^24.
void launch_count_correct(const void* logits, const int64_t* labels, int64_t rows, int64_t classes,
                          int64_t k, DType dtype, float* row_hit, float* out, gpuStream_t stream);

}  // namespace hg::gpu
