#include "hourglass/data/transforms.h"

#include <algorithm>
#include <cmath>

#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"
#include "hourglass/ops/ops.h"

namespace hg::data {

namespace {

// Separates augmentation streams from the shuffle and synthetic-data streams of one seed.
constexpr uint64_t kAugmentTag = 0x4155474D454E5400ull;  // "AUGMENT"

// One value per channel from a list of 0 (fallback), 1 (broadcast) or `channels` values.
std::vector<float> per_channel(const std::vector<float>& values, int64_t channels, float fallback,
                               const char* what) {
  if (values.empty()) return std::vector<float>(size_t(channels), fallback);
  if (values.size() == 1) return std::vector<float>(size_t(channels), values[0]);
  HG_CHECK(int64_t(values.size()) == channels,
           "{} has {} values but the images have {} (set it to one value for every channel{})",
           what, values.size(), channels == 1 ? "1 channel" : fmt::format("{} channels", channels),
           channels == 1 ? "" : fmt::format(", or {} values", channels));
  return values;
}

}  // namespace

TransformOptions default_transform(const std::string& dataset_name) {
  TransformOptions t;
  if (dataset_name == "fashion-mnist") {
    t.mean = {0.2860f};
    t.std = {0.3530f};
  } else if (dataset_name == "mnist") {
    t.mean = {0.1307f};
    t.std = {0.3081f};
  } else if (dataset_name == "cifar10") {
    t.mean = {0.4914f, 0.4822f, 0.4465f};
    t.std = {0.2470f, 0.2435f, 0.2616f};
    t.crop_padding = 4;
    t.flip = true;
  } else if (dataset_name == "cifar100") {
    // The training set's channel means and standard deviations.
    t.mean = {0.5071f, 0.4865f, 0.4409f};
    t.std = {0.2673f, 0.2564f, 0.2762f};
    t.crop_padding = 4;
    t.flip = true;
  } else if (dataset_name == "folder") {
    // ImageNet's channel statistics, the usual choice for photos; crops come from the
    // RandomResizedCrop of image_files.h, not from padding.
    t.mean = {0.485f, 0.456f, 0.406f};
    t.std = {0.229f, 0.224f, 0.225f};
    t.flip = true;
  } else if (dataset_name == "synthetic") {
    t.mean = {0.5f};
    t.std = {0.25f};
    t.crop_padding = 2;
    t.flip = true;
  }
  return t;
}

ImageTransform::ImageTransform(const TransformOptions& options, int64_t height, int64_t width,
                               int64_t channels)
    : options_(options), height_(height), width_(width), channels_(channels) {
  HG_CHECK(height >= 1 && width >= 1 && channels >= 1,
           "transform: image shape must be positive, got {}x{}x{}", height, width, channels);
  HG_CHECK(options.crop_padding >= 0 && options.crop_padding <= std::min(height, width),
           "data.crop_padding = {} does not fit {}x{} images (set it to a value in [0, {}])",
           options.crop_padding, height, width, std::min(height, width));
  HG_CHECK(options.cutout >= 0 && options.cutout <= std::min(height, width),
           "data.cutout = {} does not fit {}x{} images (set it to a value in [0, {}])",
           options.cutout, height, width, std::min(height, width));
  const double p = options.random_erasing;
  HG_CHECK(p >= 0 && p <= 1, "data.random_erasing = {} is not a probability (set it in [0, 1])", p);
  HG_CHECK(p == 0 || options.cutout == 0,
           "data.random_erasing and data.cutout both blank a rectangle: set one of them to 0");
  HG_CHECK(options.erase_scale_min > 0 && options.erase_scale_min <= options.erase_scale_max &&
               options.erase_scale_max <= 1,
           "data.erase_scale = [{}, {}] is not a range of area fractions (set 0 < min <= max <= 1)",
           options.erase_scale_min, options.erase_scale_max);
  HG_CHECK(options.erase_ratio_min > 0 && options.erase_ratio_min <= options.erase_ratio_max &&
               std::isfinite(options.erase_ratio_max),
           "data.erase_ratio = [{}, {}] is not a range of aspect ratios (set 0 < min <= max)",
           options.erase_ratio_min, options.erase_ratio_max);
  const AutoAugmentOptions& aa = options.auto_augment;
  const ColorJitterOptions& jitter = options.color_jitter;
  if (aa.policy != AutoAugment::None) {
    HG_CHECK(aa.bins >= 2 && aa.bins <= 100,
             "data.augment_bins = {} is out of range (set it in [2, 100])", aa.bins);
    HG_CHECK(aa.policy != AutoAugment::RandAugment || (aa.rand_ops >= 1 && aa.rand_ops <= 4),
             "data.rand_augment_ops = {} is out of range (set it in [1, 4])", aa.rand_ops);
    HG_CHECK(aa.policy != AutoAugment::RandAugment ||
                 (aa.rand_magnitude >= 0 && aa.rand_magnitude < aa.bins),
             "data.rand_augment_magnitude = {} is not a bin of data.augment_bins = {} (set it in "
             "[0, {}])",
             aa.rand_magnitude, aa.bins, aa.bins - 1);
  }
  for (const auto& [key, value] :
       {std::pair{"brightness", jitter.brightness}, std::pair{"contrast", jitter.contrast},
        std::pair{"saturation", jitter.saturation}, std::pair{"hue", jitter.hue}})
    HG_CHECK(value >= 0 && std::isfinite(value),
             "data.color_jitter's {} is {} (set a non-negative number, 0 for none)", key, value);
  HG_CHECK(jitter.hue <= 0.5, "data.color_jitter's hue is {} (set it in [0, 0.5])", jitter.hue);
  program_rows_ = data::program_rows(aa, jitter);
  HG_CHECK(program_rows_ <= Augmentation::kMaxOps,
           "transform: {} augmentation ops a sample exceed the {} a program holds", program_rows_,
           Augmentation::kMaxOps);
  HG_CHECK(program_rows_ == 0 || channels == 1 || channels == 3,
           "data.auto_augment and data.color_jitter need images of 1 or 3 channels, these have {}",
           channels);
  const std::vector<float> mean = per_channel(options.mean, channels, 0.0f, "data.mean");
  const std::vector<float> stdev = per_channel(options.std, channels, 1.0f, "data.std");
  for (int64_t c = 0; c < channels; ++c) {
    HG_CHECK(std::isfinite(mean[size_t(c)]), "data.mean[{}] is {} (set a finite number)", c,
             mean[size_t(c)]);
    HG_CHECK(std::isfinite(stdev[size_t(c)]) && stdev[size_t(c)] > 0.0f,
             "data.std[{}] is {} (set a positive number)", c, stdev[size_t(c)]);
    const float scale = 1.0f / (255.0f * stdev[size_t(c)]);
    const float bias = -mean[size_t(c)] / stdev[size_t(c)];
    for (int v = 0; v < 256; ++v) table_.push_back(float(v) * scale + bias);
    scale_.push_back(scale);
    bias_.push_back(bias);
  }
}

Augmentation ImageTransform::draw(uint64_t seed, int64_t epoch, int64_t sample) const {
  RandomStream rs(seed, mix_stream(uint64_t(epoch), uint64_t(sample), kAugmentTag));
  // Always draw all three, so turning one option off leaves the others' choices unchanged.
  const int64_t p = options_.crop_padding;
  const auto span = uint64_t(2 * p + 1);
  Augmentation aug;
  aug.shift_y = int64_t(rs.below(span)) - p;
  aug.shift_x = int64_t(rs.below(span)) - p;
  aug.flip = rs.uniform() < 0.5f;
  if (!options_.flip) aug.flip = false;
  // Drawn only when enabled and after the others: the crops and flips stay those drawn
  // without cutout (runs and resumes of existing configs keep their batches).
  if (options_.cutout > 0) {
    aug.cutout = options_.cutout;
    aug.cutout_y = int64_t(rs.below(uint64_t(height_)));
    aug.cutout_x = int64_t(rs.below(uint64_t(width_)));
  }
  if (options_.random_erasing > 0) draw_erasing(rs, aug);
  if (program_rows_ > 0)
    draw_program(options_.auto_augment, options_.color_jitter, height_, width_, rs, aug.ops.data(),
                 &aug.op_count);
  return aug;
}

void ImageTransform::draw_erasing(RandomStream& rs, Augmentation& aug) const {
  // torchvision's RandomErasing.get_params, on this sample's stream: the probability first,
  // then up to 10 tries of (area, log aspect ratio), each kept when the rectangle fits, then its
  // top-left corner uniform over the places where it fits.
  if (double(rs.uniform()) >= options_.random_erasing) return;
  const double area = double(height_) * double(width_);
  const double log_lo = std::log(options_.erase_ratio_min);
  const double log_hi = std::log(options_.erase_ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target =
        area * (options_.erase_scale_min +
                (options_.erase_scale_max - options_.erase_scale_min) * double(rs.uniform()));
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * double(rs.uniform()));
    const auto h = int64_t(std::lround(std::sqrt(target * aspect)));
    const auto w = int64_t(std::lround(std::sqrt(target / aspect)));
    if (!(h < height_ && w < width_) || h < 1 || w < 1) continue;
    aug.erase_y0 = int64_t(rs.below(uint64_t(height_ - h + 1)));
    aug.erase_x0 = int64_t(rs.below(uint64_t(width_ - w + 1)));
    aug.erase_y1 = aug.erase_y0 + h;
    aug.erase_x1 = aug.erase_x0 + w;
    return;
  }
}

Augmentation ImageTransform::mirrored(const Augmentation& aug) const {
  Augmentation m = aug;
  m.flip = !aug.flip;
  // Columns [cx - s/2, cx - s/2 + s) mirror to [w - cx - s + s/2, w - cx + s/2), whose centre
  // in the same convention is w - cx - s % 2 (w when s is even and cx is 0: the box is still
  // clipped to the image).
  if (aug.cutout > 0) m.cutout_x = width_ - aug.cutout_x - aug.cutout % 2;
  if (aug.erase_x1 > aug.erase_x0) {
    m.erase_x0 = width_ - aug.erase_x1;
    m.erase_x1 = width_ - aug.erase_x0;
  }
  return m;
}

BlankedBox ImageTransform::blanked_box(const Augmentation& aug) const {
  if (aug.cutout <= 0) return {aug.erase_y0, aug.erase_x0, aug.erase_y1, aug.erase_x1};
  const int64_t top = aug.cutout_y - aug.cutout / 2, left = aug.cutout_x - aug.cutout / 2;
  BlankedBox box;
  box.y0 = std::clamp<int64_t>(top, 0, height_);
  box.y1 = std::clamp<int64_t>(top + aug.cutout, box.y0, height_);
  box.x0 = std::clamp<int64_t>(left, 0, width_);
  box.x1 = std::clamp<int64_t>(left + aug.cutout, box.x0, width_);
  return box;
}

namespace {

// ImageTransform::apply's loops over an h x w x c image, writing value(ch, v) for pixel value v
// of channel ch; padding and cutout pixels are value 0.
template <typename T, typename Value>
void apply_augmentation(const uint8_t* image, const Augmentation& aug, const BlankedBox& box,
                        int64_t h, int64_t w, int64_t c, T* out, const Value& value) {
  for (int64_t y = 0; y < h; ++y) {
    T* row = out + y * w * c;
    const int64_t sy = y + aug.shift_y;
    if (sy < 0 || sy >= h) {  // entirely in the padding: zero pixels
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t ch = 0; ch < c; ++ch) row[x * c + ch] = value(ch, 0);
      }
      continue;
    }
    const uint8_t* src_row = image + sy * w * c;
    for (int64_t x = 0; x < w; ++x) {
      // The flip mirrors the cropped image: output column x shows cropped column w-1-x.
      const int64_t cx = aug.flip ? w - 1 - x : x;
      const int64_t sx = cx + aug.shift_x;
      T* px = row + x * c;
      if (sx < 0 || sx >= w) {
        for (int64_t ch = 0; ch < c; ++ch) px[ch] = value(ch, 0);
      } else {
        const uint8_t* sp = src_row + sx * c;
        for (int64_t ch = 0; ch < c; ++ch) px[ch] = value(ch, sp[ch]);
      }
    }
  }
  // Cutout and random erasing blank their rectangle in output coordinates with the padding
  // value, the table's value of pixel 0, not the normalised 0 (the channel mean) of DeVries &
  // Taylor's code and torchvision's RandomErasing(value=0): the blanked
  // area then looks like the crop's padding, and every path (ops::gather_batch on any device)
  // fills it from the table it already has.
  for (int64_t y = box.y0; y < box.y1; ++y) {
    for (int64_t x = box.x0; x < box.x1; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) out[(y * w + x) * c + ch] = value(ch, 0);
    }
  }
}

}  // namespace

template <typename T, typename Value>
void ImageTransform::apply_program(const uint8_t* image, const Augmentation& aug, T* out,
                                   const Value& value) const {
  if (aug.op_count == 0) {
    apply_augmentation(image, aug, blanked_box(aug), height_, width_, channels_, out, value);
    return;
  }
  // The crop and flip, then the program on their pixels, then the values and the blanked box.
  Tensor pixels = Tensor::empty({1, height_, width_, channels_}, DType::U8);
  apply_augmentation(image, aug, BlankedBox{}, height_, width_, channels_, pixels.data<uint8_t>(),
                     [](int64_t, uint8_t v) { return v; });
  std::vector<float> rows;
  for (int64_t k = 0; k < aug.op_count; ++k)
    rows.insert(rows.end(), aug.ops[size_t(k)].begin(), aug.ops[size_t(k)].end());
  const Tensor program = Tensor::from_vector(rows, {1, aug.op_count, kImageOpWidth});
  const Tensor augmented = ops::augment_images(pixels, program);
  apply_augmentation(augmented.data<uint8_t>(), Augmentation{}, blanked_box(aug), height_, width_,
                     channels_, out, value);
}

void ImageTransform::apply(const uint8_t* image, const Augmentation& aug, float* out) const {
  const float* table = table_.data();
  apply_program(image, aug, out, [table](int64_t ch, uint8_t v) { return table[ch * 256 + v]; });
}

void ImageTransform::apply(const uint8_t* image, const Augmentation& aug, uint8_t* out) const {
  apply_program(image, aug, out, [](int64_t, uint8_t v) { return v; });
}

void ImageTransform::normalize(float* values) const {
  const int64_t c = channels_, pixels = height_ * width_;
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t ch = 0; ch < c; ++ch) {
      float& v = values[p * c + ch];
      v = v * scale_[size_t(ch)] + bias_[size_t(ch)];
    }
  }
}

}  // namespace hg::data
