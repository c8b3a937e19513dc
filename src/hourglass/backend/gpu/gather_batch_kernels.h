// Launchers of the training batch's kernels (gather_batch_kernels.cu), called by
// gather_batch.cpp.
//
// launch_gather_batch:
// images: n u8 images of h*w*c (HWC); labels: n u8, or null (no labels: out_labels is null
// too); indices: `batch` i64, or null (image b for row b, batch = n); augment: `batch` rows of 7
// i32 (shift_y, shift_x, flip, cutout box y0, x0, y1, x1), or null; table: c*256 f32, or null
// (the pixel values themselves). Writes batch*h*w*c f32 (u8 without a table) to out_images and
// `batch` i64 to out_labels, as CpuBackend::gather_batch does;
// an index outside [0, n) gives a zero image and label -1 (the device cannot throw). Nothing is
// launched for an empty batch.
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

void launch_gather_batch(const uint8_t* images, const uint8_t* labels, const int64_t* indices,
                         const int32_t* augment, const float* table, int64_t n, int64_t h,
                         int64_t w, int64_t c, int64_t batch, void* out_images, int64_t* out_labels,
                         gpuStream_t stream);

// images: n f32 images of h*w*c (HWC); labels: n i64; params: 6 f32 on the device (weights
// outside and inside the box, box y0, x0, y1, x1). Writes the mixed images and the partners'
// labels as CpuBackend::mix_batch does (ops::mix_batch), bit for bit. Nothing is launched for
// an empty batch.
void launch_mix_batch(const float* images, const int64_t* labels, const float* params, int64_t n,
                      int64_t h, int64_t w, int64_t c, float* out_images, int64_t* out_labels,
                      gpuStream_t stream);

}  // namespace hg::gpu
