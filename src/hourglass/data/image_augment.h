// The augmentation policies that run as ops::augment_images programs (ImageOpKind,
// ops/params.h): torchvision's TrivialAugmentWide and RandAugment (transforms/autoaugment.py,
// 0.14: their op space, magnitude bins and _apply_op) and ColorJitter, each drawn per sample on
// its augmentation stream and written as program rows. The rows' parameters are computed as
// torchvision computes them (affine matrices in double, then f32 as its grid holds them).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "hourglass/ops/params.h"

namespace hg {
class RandomStream;
}

namespace hg::data {

// One row of a program: the kind, then its parameters (ops/params.h).
using ImageOp = std::array<float, kImageOpWidth>;

// torchvision's automatic-augmentation op space, in its order (what a policy draws the index
// of).
enum class AugmentOp : int32_t {
  Identity,
  ShearX,
  ShearY,
  TranslateX,
  TranslateY,
  Rotate,
  Brightness,
  Color,
  Contrast,
  Sharpness,
  Posterize,
  Solarize,
  AutoContrast,
  Equalize,
};
inline constexpr int32_t kAugmentOps = 14;
const char* augment_op_name(AugmentOp op);

// The rows of torchvision's functional ops on an h x w image (F.affine with its centre and
// F.rotate, nearest-neighbour and fill 0; the blends' factor; F.posterize's bits; F.solarize's
// threshold; F.adjust_hue's shift).
ImageOp affine_row(double angle, double translate_x, double translate_y, double shear_x,
                   double shear_y, bool centre_top_left, int64_t h, int64_t w);
ImageOp factor_row(ImageOpKind kind, double factor);
ImageOp value_row(ImageOpKind kind, double value);

// _apply_op(img, op, magnitude): the row of `op` at its signed magnitude on an h x w image
// (Identity gives a None row).
ImageOp augment_op_row(AugmentOp op, double magnitude, int64_t h, int64_t w);

// Which automatic augmentation a sample draws (TransformOptions::auto_augment).
enum class AutoAugment : int32_t { None, TrivialAugmentWide, RandAugment };
// "none", "trivial_augment_wide", "rand_augment"; nothing for other names.
std::optional<AutoAugment> parse_auto_augment(const std::string& name);
const char* auto_augment_name(AutoAugment policy);

struct AutoAugmentOptions {
  AutoAugment policy = AutoAugment::None;
  // RandAugment's number of ops a sample and magnitude bin; both policies' number of bins.
  int64_t rand_ops = 2;
  int64_t rand_magnitude = 9;
  int64_t bins = 31;
};

// The unsigned magnitude of bin `bin` of `op` in `policy`'s space (the f32 value torchvision's
// linspace gives) for an h x w image; 0 for the ops without magnitudes. `signed_op` is whether
// the policy negates it with probability 1/2.
double augment_magnitude(AutoAugment policy, AugmentOp op, int64_t bin, int64_t bins, int64_t h,
                         int64_t w, bool* signed_op);

// ColorJitter's ranges: brightness, contrast and saturation factors uniform in
// [max(0, 1 - x), 1 + x], the hue shift in [-hue, hue] (hue <= 0.5); 0 leaves one out.
struct ColorJitterOptions {
  double brightness = 0, contrast = 0, saturation = 0, hue = 0;
  bool enabled() const { return brightness > 0 || contrast > 0 || saturation > 0 || hue > 0; }
};

// The most rows a sample's program holds under these options (its policy's ops, then the
// jitter's 4 at most).
int64_t program_rows(const AutoAugmentOptions& a, const ColorJitterOptions& j);

// Appends one sample's draws to `rows` (`count` in use, at most program_rows()): the policy's
// ops (TrivialAugmentWide: one op, its bin and sign uniform; RandAugment: rand_ops ops at
// bin rand_magnitude, signs uniform), then the jitter's enabled ops in a uniformly random order
// with their factors, as torchvision's ColorJitter.
void draw_program(const AutoAugmentOptions& a, const ColorJitterOptions& j, int64_t h, int64_t w,
                  RandomStream& rs, ImageOp* rows, int64_t* count);

}  // namespace hg::data
