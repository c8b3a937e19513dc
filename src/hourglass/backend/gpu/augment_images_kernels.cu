// ops::augment_images on the GPU: one block per image, its program run op by op with the block
// synchronised between them; the image is updated in place in the output, through a scratch
// image for the ops that read other pixels (affine resampling, sharpness). Means, extremes and
// histograms are integer sums in shared memory (atomics, so any order gives the CPU's result),
// and the per-pixel arithmetic is image_op_functors.h's, so the output is the CPU's bit for bit.
#include <cstdint>

#include "hourglass/backend/gpu/augment_images_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/image_op_functors.h"
#include "hourglass/ops/params.h"

namespace hg::gpu {

namespace {

using namespace image_ops;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    augment_images_kernel(const float* __restrict__ program, int64_t ops, int64_t h, int64_t w,
                          int64_t c, uint8_t* __restrict__ images, uint8_t* __restrict__ scratch) {
  __shared__ int32_t hist[3 * 256];
  __shared__ uint8_t lut[3 * 256];
  __shared__ int32_t stats[8];  // contrast's sum; autocontrast's minima and maxima
  __shared__ int32_t changed[3];
  const int64_t pixels = h * w, n = pixels * c;
  uint8_t* image = images + int64_t(blockIdx.x) * n;
  uint8_t* tmp = scratch + int64_t(blockIdx.x) * n;
  const float* prog = program + int64_t(blockIdx.x) * ops * kImageOpWidth;
  const int tid = int(threadIdx.x), threads = int(blockDim.x);
  auto copy_back = [&] {
    __syncthreads();
    for (int64_t e = tid; e < n; e += threads) image[e] = tmp[e];
  };
  for (int64_t k = 0; k < ops; ++k) {
    const float* row = prog + k * kImageOpWidth;
    const auto kind = ImageOpKind(int32_t(row[0]));
    const float* p = row + 1;
    __syncthreads();  // the previous op's writes are visible
    switch (kind) {
      case ImageOpKind::None: break;
      case ImageOpKind::Affine:
        for (int64_t q = tid; q < pixels; q += threads) {
          int64_t sx = 0, sy = 0;
          const bool inside = affine_source(p, q % w, q / w, w, h, &sx, &sy);
          for (int64_t ch = 0; ch < c; ++ch)
            tmp[q * c + ch] = inside ? image[(sy * w + sx) * c + ch] : uint8_t(0);
        }
        copy_back();
        break;
      case ImageOpKind::Brightness:
        for (int64_t e = tid; e < n; e += threads)
          image[e] = blend(p[0], p[1], float(image[e]), 0.0f);
        break;
      case ImageOpKind::Saturation:
        if (c != 3) break;
        for (int64_t q = tid; q < pixels; q += threads) {
          uint8_t* px = image + q * 3;
          const float gray = float(grayscale(px[0], px[1], px[2]));
          for (int ch = 0; ch < 3; ++ch) px[ch] = blend(p[0], p[1], float(px[ch]), gray);
        }
        break;
      case ImageOpKind::Contrast: {
        if (tid == 0) stats[0] = 0;
        __syncthreads();
        int32_t sum = 0;
        for (int64_t q = tid; q < pixels; q += threads) {
          const uint8_t* px = image + q * c;
          sum += c == 3 ? grayscale(px[0], px[1], px[2]) : px[0];
        }
        atomicAdd(&stats[0], sum);
        __syncthreads();
        const float mean = float(stats[0]) / float(pixels);
        for (int64_t e = tid; e < n; e += threads)
          image[e] = blend(p[0], p[1], float(image[e]), mean);
        break;
      }
      case ImageOpKind::Sharpness:
        if (h <= 2 || w <= 2) break;
        for (int64_t e = tid; e < n; e += threads) {
          const int64_t q = e / c, x = q % w, y = q / w;
          // The border blends with itself (the smoothed image keeps it).
          if (y == 0 || x == 0 || y == h - 1 || x == w - 1) {
            tmp[e] = blend(p[0], p[1], float(image[e]), float(image[e]));
            continue;
          }
          int32_t sum9 = 0;
          for (int64_t dy = -1; dy <= 1; ++dy)
            for (int64_t dx = -1; dx <= 1; ++dx) sum9 += image[e + (dy * w + dx) * c];
          tmp[e] = blend(p[0], p[1], float(image[e]), smoothed(sum9, image[e]));
        }
        copy_back();
        break;
      case ImageOpKind::Posterize:
        for (int64_t e = tid; e < n; e += threads) image[e] = posterize(image[e], int32_t(p[0]));
        break;
      case ImageOpKind::Solarize:
        for (int64_t e = tid; e < n; e += threads) image[e] = solarize(image[e], p[0]);
        break;
      case ImageOpKind::AutoContrast:
        if (tid < 3) {
          stats[tid] = 255;
          stats[3 + tid] = 0;
        }
        __syncthreads();
        for (int64_t e = tid; e < n; e += threads) {
          atomicMin(&stats[e % c], int32_t(image[e]));
          atomicMax(&stats[3 + e % c], int32_t(image[e]));
        }
        __syncthreads();
        for (int64_t e = tid; e < n; e += threads)
          image[e] = autocontrast(image[e], stats[e % c], stats[3 + e % c]);
        break;
      case ImageOpKind::Equalize:
        for (int i = tid; i < 3 * 256; i += threads) hist[i] = 0;
        __syncthreads();
        for (int64_t e = tid; e < n; e += threads) atomicAdd(&hist[(e % c) * 256 + image[e]], 1);
        __syncthreads();
        if (tid < c) changed[tid] = equalize_lut(hist + tid * 256, lut + tid * 256) ? 1 : 0;
        __syncthreads();
        for (int64_t e = tid; e < n; e += threads) {
          const int64_t ch = e % c;
          if (changed[ch] != 0) image[e] = lut[ch * 256 + image[e]];
        }
        break;
      case ImageOpKind::Hue:
        if (c != 3) break;
        for (int64_t q = tid; q < pixels; q += threads) shift_hue(image + q * 3, p[0]);
        break;
    }
  }
}

}  // namespace

void launch_augment_images(const float* program, int64_t batch, int64_t ops, int64_t h, int64_t w,
                           int64_t c, uint8_t* images, uint8_t* scratch, gpuStream_t stream) {
  if (batch == 0 || ops == 0 || h * w * c == 0) return;
  augment_images_kernel<<<unsigned(batch), kThreads, 0, stream>>>(program, ops, h, w, c, images,
                                                                  scratch);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
