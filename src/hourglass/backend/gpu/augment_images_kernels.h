// Launcher of ops::augment_images' kernel (augment_images_kernels.cu), called by
// gather_batch.cpp.
//
// launch_augment_images: images: `batch` u8 images of h*w*c (HWC, c 1 or 3), changed in place;
// program: batch*ops rows of kImageOpWidth f32 (ops/params.h), image b's rows in order;
// scratch: as many bytes as the images. Runs each image's program as CpuBackend::augment_images
// does, bit for bit. Nothing is launched for an empty batch or program.
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

void launch_augment_images(const float* program, int64_t batch, int64_t ops, int64_t h, int64_t w,
                           int64_t c, uint8_t* images, uint8_t* scratch, gpuStream_t stream);

}  // namespace hg::gpu
