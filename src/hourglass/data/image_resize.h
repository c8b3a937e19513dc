// Geometry for images of any size: bilinear resizing of a crop, torchvision's
// RandomResizedCrop box (training) and the resize-then-centre-crop of evaluation.
//
// The resize is bilinear interpolation with half-pixel centres (PyTorch's align_corners=False).
// Plain (torchvision's antialias=False) it samples the source's two nearest pixels per axis, so
// shrinking by more than 2x skips pixels and fine detail aliases. Antialiased (PIL's bilinear
// resize, torchvision's antialias=True) the triangle filter widens with the shrink factor and
// averages every source pixel under it; enlarging, both are the same interpolation. Training
// crops resize plain (usually shrunk by less than 2x); evaluation antialiases by default
// (data.eval_antialias), as PIL and torchvision's evaluation transforms do.
#pragma once

#include <cstdint>

namespace hg::data {

// A rectangle of pixels: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0;
  int64_t left = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// Pixels held for a part of an image: rows [top, top + height) and columns [left, left + width)
// of it, `channels` uint8 values a pixel, row-major (rows width * channels values apart). A
// whole image is the region {pixels, 0, 0, height, width, channels}.
struct ImageRegion {
  const uint8_t* pixels = nullptr;
  int64_t top = 0;
  int64_t left = 0;
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
};

// Resizes `box` of an image (box in the image's coordinates) to out_height x out_width, and
// writes the part `window` of that result (a box inside out_height x out_width) to `out`, HWC
// (window.height x window.width x channels). Samples that fall outside `box` are clamped to its
// edge, as when the box is cropped out first. `flip` mirrors the written window horizontally.
// `src` must hold the pixels the window samples (resize_footprint), which may be less than the
// box. Arguments out of range are an internal error (callers compute them).
//
// As f32 values in [0, 255]; with `scale` and `bias` (one per channel) each value v is written
// as v * scale[c] + bias[c] (ImageTransform's normalisation, in the same arithmetic as
// ImageTransform::normalize, without a second pass over the output).
void resize_bilinear(const ImageRegion& src, const CropBox& box, int64_t out_height,
                     int64_t out_width, const CropBox& window, bool flip, float* out,
                     const float* scale = nullptr, const float* bias = nullptr);
// The antialiased resize, with resize_bilinear's arguments and output: each output pixel is the
// normalised triangle-filter average (support max(1, shrink factor) source pixels each side of
// its centre, clamped to the box) of the box's pixels, as PIL's Image.resize(BILINEAR) of the
// cropped box, computed in f32 without PIL's uint8 rounding between its two passes. `src`
// must hold resize_footprint(..., true).
void resize_antialiased(const ImageRegion& src, const CropBox& box, int64_t out_height,
                        int64_t out_width, const CropBox& window, bool flip, float* out,
                        const float* scale = nullptr, const float* bias = nullptr);
void resize_antialiased(const ImageRegion& src, const CropBox& box, int64_t out_height,
                        int64_t out_width, const CropBox& window, bool flip, uint8_t* out);
// As uint8 values: each f32 result rounded to the nearest integer (halves up), as an image
// library's resize hands back uint8 pixels.
void resize_bilinear(const ImageRegion& src, const CropBox& box, int64_t out_height,
                     int64_t out_width, const CropBox& window, bool flip, uint8_t* out);

// The rows and columns of the image that resize_bilinear (resize_antialiased, with
// `antialiased`) reads for `window` of `box` resized to out_height x out_width: the smallest
// region `src` may be.
CropBox resize_footprint(const CropBox& box, int64_t out_height, int64_t out_width,
                         const CropBox& window, bool antialiased = false);

// torchvision's RandomResizedCrop(scale, ratio) box for an image of height x width, with the
// uniform draws taken from `uniform01` (a callable returning doubles in [0, 1)): up to 10
// tries of an area fraction uniform in [scale_min, scale_max] and an aspect ratio (w/h)
// log-uniform in [ratio_min, ratio_max], keeping the first that fits, placed uniformly; else
// the centre crop of the whole image clamped to the ratio range (torchvision's fallback).
struct ResizedCropOptions {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
};
template <typename Uniform01>
CropBox random_resized_crop(int64_t height, int64_t width, const ResizedCropOptions& o,
                            Uniform01&& uniform01);

// Evaluation: the image resized so its shorter side is `resize_to` (the longer side scaled
// and truncated, as torchvision's Resize(int) does), then the centre `crop` x `crop` of that
// (offsets rounded as torchvision's CenterCrop). resize_to must be >= crop.
struct EvalGeometry {
  int64_t resized_height = 0, resized_width = 0;
  CropBox window;  // in the resized image
};
EvalGeometry eval_geometry(int64_t height, int64_t width, int64_t resize_to, int64_t crop);

// The shorter side evaluation resizes to for a crop of `size`: round(size * 256 / 224), the
// ImageNet convention (224 -> 256).
int64_t eval_resize_for(int64_t size);

// The training augmentation of sample `sample` in epoch `epoch` of an image of height x width:
// its RandomResizedCrop box and a horizontal flip (probability 1/2 when `flip`), drawn from a
// Philox stream keyed by (seed, epoch, sample), so the same sample in the same epoch gets the
// same crop whichever thread or batch builds it.
struct SizedAugmentation {
  CropBox box;
  bool flip = false;
};
SizedAugmentation draw_resized_crop(uint64_t seed, int64_t epoch, int64_t sample, int64_t height,
                                    int64_t width, const ResizedCropOptions& options, bool flip);

// ---- template definition ----

CropBox fallback_center_crop(int64_t height, int64_t width, const ResizedCropOptions& o);
CropBox resized_crop_try(int64_t height, int64_t width, const ResizedCropOptions& o, double u_area,
                         double u_ratio, bool& fits);

template <typename Uniform01>
CropBox random_resized_crop(int64_t height, int64_t width, const ResizedCropOptions& o,
                            Uniform01&& uniform01) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double u_area = uniform01();
    const double u_ratio = uniform01();
    bool fits = false;
    CropBox box = resized_crop_try(height, width, o, u_area, u_ratio, fits);
    if (!fits) continue;
    box.top = int64_t(uniform01() * double(height - box.height + 1));
    box.left = int64_t(uniform01() * double(width - box.width + 1));
    return box;
  }
  return fallback_center_crop(height, width, o);
}

}  // namespace hg::data
