#include "hourglass/data/image_augment.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "hourglass/base/rng.h"

namespace hg::data {

namespace {

ImageOp row_of(ImageOpKind kind) {
  ImageOp row{};
  row[0] = float(int32_t(kind));
  return row;
}

double radians(double degrees) { return degrees * (std::numbers::pi / 180.0); }
double degrees(double radians) { return radians * (180.0 / std::numbers::pi); }

// torch.linspace(lo, hi, bins)[bin] as the f32 it holds: its CPU kernel's f32 arithmetic, the
// first half counted from the start and the second from the end.
double linspace(double lo, double hi, int64_t bin, int64_t bins) {
  const float start = float(lo), end = float(hi);
  if (bins == 1) return double(start);
  const float step = (end - start) / float(bins - 1);
  volatile float product;  // rounded on its own, as the kernel's product is
  if (bin < bins / 2) {
    product = step * float(bin);
    return double(start + product);
  }
  product = step * float(bins - bin - 1);
  return double(end - product);
}

}  // namespace

const char* augment_op_name(AugmentOp op) {
  static constexpr const char* kNames[kAugmentOps] = {
      "Identity", "ShearX",   "ShearY",    "TranslateX", "TranslateY", "Rotate",       "Brightness",
      "Color",    "Contrast", "Sharpness", "Posterize",  "Solarize",   "AutoContrast", "Equalize"};
  return kNames[int32_t(op)];
}

ImageOp affine_row(double angle, double translate_x, double translate_y, double shear_x,
                   double shear_y, bool centre_top_left, int64_t h, int64_t w) {
  // F.affine's centre relative to the image's (0, 0) at its middle; F.rotate and a centre of
  // None use the middle.
  const double cx = centre_top_left ? 0.0 - double(w) * 0.5 : 0.0;
  const double cy = centre_top_left ? 0.0 - double(h) * 0.5 : 0.0;
  // _get_inverse_affine_matrix(center, angle, translate, scale = 1, shear), inverted.
  const double rot = radians(angle), sx = radians(shear_x), sy = radians(shear_y);
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  double m[6] = {d, -b, 0.0, -c, a, 0.0};
  m[2] += m[0] * (-cx - translate_x) + m[1] * (-cy - translate_y);
  m[5] += m[3] * (-cx - translate_x) + m[4] * (-cy - translate_y);
  m[2] += cx;
  m[5] += cy;
  // The grid's theta in f32, transposed and divided by (w/2, h/2) in f32 (_gen_affine_grid).
  const float half_w = float(0.5 * double(w)), half_h = float(0.5 * double(h));
  ImageOp row = row_of(ImageOpKind::Affine);
  row[1] = float(m[0]) / half_w;
  row[2] = float(m[1]) / half_w;
  row[3] = float(m[2]) / half_w;
  row[4] = float(m[3]) / half_h;
  row[5] = float(m[4]) / half_h;
  row[6] = float(m[5]) / half_h;
  return row;
}

ImageOp factor_row(ImageOpKind kind, double factor) {
  ImageOp row = row_of(kind);
  // _blend's f32 operands: the factor and 1 - factor (computed in double, as Python does).
  row[1] = float(factor);
  row[2] = float(1.0 - factor);
  return row;
}

ImageOp value_row(ImageOpKind kind, double value) {
  ImageOp row = row_of(kind);
  row[1] = float(value);
  return row;
}

ImageOp augment_op_row(AugmentOp op, double magnitude, int64_t h, int64_t w) {
  switch (op) {
    case AugmentOp::Identity: return row_of(ImageOpKind::None);
    case AugmentOp::ShearX:
      return affine_row(0.0, 0.0, 0.0, degrees(std::atan(magnitude)), 0.0, true, h, w);
    case AugmentOp::ShearY:
      return affine_row(0.0, 0.0, 0.0, 0.0, degrees(std::atan(magnitude)), true, h, w);
    case AugmentOp::TranslateX:
      return affine_row(0.0, std::trunc(magnitude), 0.0, 0.0, 0.0, false, h, w);
    case AugmentOp::TranslateY:
      return affine_row(0.0, 0.0, std::trunc(magnitude), 0.0, 0.0, false, h, w);
    case AugmentOp::Rotate:  // F.rotate turns by -angle through the affine matrix
      return affine_row(-magnitude, 0.0, 0.0, 0.0, 0.0, false, h, w);
    case AugmentOp::Brightness: return factor_row(ImageOpKind::Brightness, 1.0 + magnitude);
    case AugmentOp::Color: return factor_row(ImageOpKind::Saturation, 1.0 + magnitude);
    case AugmentOp::Contrast: return factor_row(ImageOpKind::Contrast, 1.0 + magnitude);
    case AugmentOp::Sharpness: return factor_row(ImageOpKind::Sharpness, 1.0 + magnitude);
    case AugmentOp::Posterize: return value_row(ImageOpKind::Posterize, std::trunc(magnitude));
    case AugmentOp::Solarize: return value_row(ImageOpKind::Solarize, magnitude);
    case AugmentOp::AutoContrast: return row_of(ImageOpKind::AutoContrast);
    case AugmentOp::Equalize: return row_of(ImageOpKind::Equalize);
  }
  return row_of(ImageOpKind::None);
}

const char* auto_augment_name(AutoAugment policy) {
  switch (policy) {
    case AutoAugment::None: return "none";
    case AutoAugment::TrivialAugmentWide: return "trivial_augment_wide";
    case AutoAugment::RandAugment: return "rand_augment";
  }
  return "none";
}

std::optional<AutoAugment> parse_auto_augment(const std::string& name) {
  for (const AutoAugment policy :
       {AutoAugment::None, AutoAugment::TrivialAugmentWide, AutoAugment::RandAugment})
    if (name == auto_augment_name(policy)) return policy;
  return std::nullopt;
}

double augment_magnitude(AutoAugment policy, AugmentOp op, int64_t bin, int64_t bins, int64_t h,
                         int64_t w, bool* signed_op) {
  const bool wide = policy == AutoAugment::TrivialAugmentWide;
  *signed_op = true;
  switch (op) {
    case AugmentOp::ShearX:
    case AugmentOp::ShearY: return linspace(0.0, wide ? 0.99 : 0.3, bin, bins);
    case AugmentOp::TranslateX:
      return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * double(w), bin, bins);
    case AugmentOp::TranslateY:
      return linspace(0.0, wide ? 32.0 : 150.0 / 331.0 * double(h), bin, bins);
    case AugmentOp::Rotate: return linspace(0.0, wide ? 135.0 : 30.0, bin, bins);
    case AugmentOp::Brightness:
    case AugmentOp::Color:
    case AugmentOp::Contrast:
    case AugmentOp::Sharpness: return linspace(0.0, wide ? 0.99 : 0.9, bin, bins);
    case AugmentOp::Posterize: {
      *signed_op = false;
      // 8 - round(bin / ((bins - 1) / levels)) in f32, levels 6 (wide) or 4.
      const double levels = wide ? 6.0 : 4.0;
      const float step = float(double(bins - 1) / levels);
      return 8.0 - double(std::nearbyint(float(bin) / step));
    }
    case AugmentOp::Solarize: *signed_op = false; return linspace(255.0, 0.0, bin, bins);
    case AugmentOp::Identity:
    case AugmentOp::AutoContrast:
    case AugmentOp::Equalize: break;
  }
  *signed_op = false;
  return 0.0;
}

int64_t program_rows(const AutoAugmentOptions& a, const ColorJitterOptions& j) {
  int64_t rows = 0;
  if (a.policy == AutoAugment::TrivialAugmentWide) rows += 1;
  if (a.policy == AutoAugment::RandAugment) rows += a.rand_ops;
  if (j.enabled()) rows += 4;
  return rows;
}

void draw_program(const AutoAugmentOptions& a, const ColorJitterOptions& j, int64_t h, int64_t w,
                  RandomStream& rs, ImageOp* rows, int64_t* count) {
  const auto draw_op = [&](int64_t fixed_bin) {
    const auto op = AugmentOp(int32_t(rs.below(kAugmentOps)));
    bool signed_op = false;
    const bool has_bins =
        op != AugmentOp::Identity && op != AugmentOp::AutoContrast && op != AugmentOp::Equalize;
    const int64_t bin =
        fixed_bin >= 0 ? fixed_bin : (has_bins ? int64_t(rs.below(uint64_t(a.bins))) : 0);
    double magnitude = augment_magnitude(a.policy, op, bin, a.bins, h, w, &signed_op);
    if (signed_op && rs.below(2) == 1) magnitude = -magnitude;
    const ImageOp row = augment_op_row(op, magnitude, h, w);
    if (row[0] != 0.0f) rows[(*count)++] = row;
  };
  if (a.policy == AutoAugment::TrivialAugmentWide) draw_op(-1);
  if (a.policy == AutoAugment::RandAugment)
    for (int64_t k = 0; k < a.rand_ops; ++k) draw_op(a.rand_magnitude);
  if (!j.enabled()) return;
  // ColorJitter.get_params: a random order of the four, each factor uniform in its range.
  int order[4] = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[rs.below(uint64_t(i + 1))]);
  const auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * rs.uniform_open(); };
  // Brightness, contrast and saturation factors uniform in [max(0, 1 - x), 1 + x].
  const std::pair<ImageOpKind, double> factors[3] = {{ImageOpKind::Brightness, j.brightness},
                                                     {ImageOpKind::Contrast, j.contrast},
                                                     {ImageOpKind::Saturation, j.saturation}};
  for (const int fn : order) {
    if (fn < 3) {
      const auto [kind, x] = factors[fn];
      if (x > 0) rows[(*count)++] = factor_row(kind, uniform(std::max(0.0, 1.0 - x), 1.0 + x));
    } else if (j.hue > 0) {
      rows[(*count)++] = value_row(ImageOpKind::Hue, uniform(-j.hue, j.hue));
    }
  }
}

}  // namespace hg::data
