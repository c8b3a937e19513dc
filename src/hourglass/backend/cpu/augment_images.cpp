// ops::augment_images on the CPU, the reference for the GPU kernel: each image's program run op
// by op, one image per task. The per-pixel arithmetic is image_op_functors.h's; the statistics
// (means, extremes, histograms) are integer sums, so any order gives the same result.
#include <algorithm>
#include <cstring>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/image_op_functors.h"
#include "hourglass/base/parallel.h"

namespace hg {

namespace {

using namespace image_ops;

// Runs `ops` program rows (kImageOpWidth floats each) over one h x w x c image in `image`, with
// `scratch` (as large) for the ops that read neighbours.
void run_program(uint8_t* image, uint8_t* scratch, const float* program, int64_t ops, int64_t h,
                 int64_t w, int64_t c) {
  const int64_t pixels = h * w, n = pixels * c;
  for (int64_t k = 0; k < ops; ++k) {
    const float* row = program + k * kImageOpWidth;
    const auto kind = ImageOpKind(int32_t(row[0]));
    const float* p = row + 1;
    switch (kind) {
      case ImageOpKind::None: break;
      case ImageOpKind::Affine:
        for (int64_t y = 0; y < h; ++y) {
          for (int64_t x = 0; x < w; ++x) {
            int64_t sx = 0, sy = 0;
            const bool inside = affine_source(p, x, y, w, h, &sx, &sy);
            for (int64_t ch = 0; ch < c; ++ch)
              scratch[(y * w + x) * c + ch] = inside ? image[(sy * w + sx) * c + ch] : 0;
          }
        }
        std::memcpy(image, scratch, size_t(n));
        break;
      case ImageOpKind::Brightness:
        for (int64_t e = 0; e < n; ++e) image[e] = blend(p[0], p[1], float(image[e]), 0.0f);
        break;
      case ImageOpKind::Saturation:
        if (c != 3) break;
        for (int64_t q = 0; q < pixels; ++q) {
          uint8_t* px = image + q * 3;
          const float gray = float(grayscale(px[0], px[1], px[2]));
          for (int ch = 0; ch < 3; ++ch) px[ch] = blend(p[0], p[1], float(px[ch]), gray);
        }
        break;
      case ImageOpKind::Contrast: {
        int64_t sum = 0;
        for (int64_t q = 0; q < pixels; ++q) {
          const uint8_t* px = image + q * c;
          sum += c == 3 ? grayscale(px[0], px[1], px[2]) : px[0];
        }
        const float mean = float(sum) / float(pixels);
        for (int64_t e = 0; e < n; ++e) image[e] = blend(p[0], p[1], float(image[e]), mean);
        break;
      }
      case ImageOpKind::Sharpness:
        if (h <= 2 || w <= 2) break;
        for (int64_t y = 0; y < h; ++y) {
          for (int64_t x = 0; x < w; ++x) {
            for (int64_t ch = 0; ch < c; ++ch) {
              const int64_t e = (y * w + x) * c + ch;
              // The border blends with itself (the smoothed image keeps it).
              if (y == 0 || x == 0 || y == h - 1 || x == w - 1) {
                scratch[e] = blend(p[0], p[1], float(image[e]), float(image[e]));
                continue;
              }
              int32_t sum9 = 0;
              for (int64_t dy = -1; dy <= 1; ++dy)
                for (int64_t dx = -1; dx <= 1; ++dx) sum9 += image[e + (dy * w + dx) * c];
              scratch[e] = blend(p[0], p[1], float(image[e]), smoothed(sum9, image[e]));
            }
          }
        }
        std::memcpy(image, scratch, size_t(n));
        break;
      case ImageOpKind::Posterize:
        for (int64_t e = 0; e < n; ++e) image[e] = posterize(image[e], int32_t(p[0]));
        break;
      case ImageOpKind::Solarize:
        for (int64_t e = 0; e < n; ++e) image[e] = solarize(image[e], p[0]);
        break;
      case ImageOpKind::AutoContrast:
        for (int64_t ch = 0; ch < c; ++ch) {
          int32_t lo = 255, hi = 0;
          for (int64_t q = 0; q < pixels; ++q) {
            lo = std::min<int32_t>(lo, image[q * c + ch]);
            hi = std::max<int32_t>(hi, image[q * c + ch]);
          }
          for (int64_t q = 0; q < pixels; ++q)
            image[q * c + ch] = autocontrast(image[q * c + ch], lo, hi);
        }
        break;
      case ImageOpKind::Equalize:
        for (int64_t ch = 0; ch < c; ++ch) {
          int32_t hist[256] = {};
          for (int64_t q = 0; q < pixels; ++q) ++hist[image[q * c + ch]];
          uint8_t lut[256];
          if (!equalize_lut(hist, lut)) continue;
          for (int64_t q = 0; q < pixels; ++q) image[q * c + ch] = lut[image[q * c + ch]];
        }
        break;
      case ImageOpKind::Hue:
        if (c != 3) break;
        for (int64_t q = 0; q < pixels; ++q) shift_hue(image + q * 3, p[0]);
        break;
    }
  }
}

}  // namespace

Tensor CpuBackend::augment_images(const Tensor& images, const Tensor& program) {
  const int64_t batch = images.size(0), h = images.size(1), w = images.size(2), c = images.size(3);
  const int64_t ops = program.size(1), n = h * w * c;
  Tensor out = images.clone();
  uint8_t* dst = out.data<uint8_t>();
  const float* prog = program.data<float>();
  parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
    std::vector<uint8_t> scratch(static_cast<size_t>(n));
    for (int64_t b = b0; b < b1; ++b)
      run_program(dst + b * n, scratch.data(), prog + b * ops * kImageOpWidth, ops, h, w, c);
  });
  return out;
}

}  // namespace hg
