// Per-sample image transforms: random crop with zero padding, random horizontal flip, an
// automatic augmentation (TrivialAugmentWide or RandAugment) and colour jitter on the uint8
// pixels (ops::augment_images programs, image_augment.h), cutout (a random square set to the
// padding value) or random erasing (a random rectangle, likewise), and per-channel
// normalisation from uint8 HWC into f32 HWC. The random choices for a sample are a pure function of
// (seed, epoch, sample index) through a Philox stream, so a batch holds the same values whatever
// the worker count, batch order or resume point.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hourglass/data/image_augment.h"

namespace hg {
class RandomStream;
}

namespace hg::data {

struct TransformOptions {
  // Random crop: pad each side by this many pixels of value 0 (before normalisation, as
  // torchvision does), then crop back to H x W at a random offset. 0 disables it.
  int64_t crop_padding = 0;
  // Random horizontal flip with probability 0.5.
  bool flip = false;
  // Cutout (DeVries & Taylor 2017): a square of this side, centred on a pixel drawn uniformly
  // over the image and clipped at its borders, is set to the padding value (pixel value 0
  // normalised) after the crop and flip. 0 disables it.
  int64_t cutout = 0;
  // Random erasing (Zhong et al. 2020; torchvision's RandomErasing): with this probability, a
  // rectangle whose area is a fraction of the image uniform in [erase_scale_min,
  // erase_scale_max] and whose aspect ratio (height / width) is log-uniform in
  // [erase_ratio_min, erase_ratio_max] is set to the padding value after the crop and flip; up
  // to 10 tries for a rectangle that fits inside the image, else nothing is erased. Its place is
  // uniform over the positions where it fits. 0 disables it; not together with cutout (both
  // blank one rectangle a sample).
  double random_erasing = 0;
  double erase_scale_min = 0.02, erase_scale_max = 0.33;
  double erase_ratio_min = 0.3, erase_ratio_max = 3.3;
  // After the crop and flip, before the normalisation and the blanked rectangle (torchvision's
  // order: RandomCrop, RandomHorizontalFlip, the policy, ColorJitter, ToTensor, Normalize,
  // RandomErasing): the automatic augmentation's ops, then the colour jitter's, on the uint8
  // pixels (ops::augment_images). Images of 1 or 3 channels.
  AutoAugmentOptions auto_augment;
  ColorJitterOptions color_jitter;
  // Normalisation x = (pixel / 255 - mean[c]) / std[c]. Each holds one value per channel, or
  // one value for all channels; empty means mean 0 and std 1.
  std::vector<float> mean;
  std::vector<float> std;
};

// The usual settings for a dataset by name: its channel mean and std, plus crop (padding 4)
// and flip for cifar10 and synthetic (used when augmenting); for "folder" (image files)
// ImageNet's mean and std and flip. Unknown names get {} (x / 255).
TransformOptions default_transform(const std::string& dataset_name);

// The random choices for one sample.
struct Augmentation {
  // Crop offset: output(y, x) = input(y + shift_y, x + shift_x), zero where that falls outside.
  int64_t shift_y = 0;
  int64_t shift_x = 0;
  // Mirror horizontally, applied after the crop.
  bool flip = false;
  // Cutout, in output coordinates (after the crop and flip): the square of side `cutout` (0:
  // none) covering rows [cutout_y - cutout / 2, cutout_y - cutout / 2 + cutout) and the same
  // columns around cutout_x, clipped to the image. The centre may lie outside the image only in
  // a mirrored augmentation (ImageTransform::mirrored).
  int64_t cutout_y = 0;
  int64_t cutout_x = 0;
  int64_t cutout = 0;
  // Random erasing, in output coordinates: rows [erase_y0, erase_y1) and columns
  // [erase_x0, erase_x1), inside the image; empty (the default) when nothing is erased.
  int64_t erase_y0 = 0, erase_x0 = 0, erase_y1 = 0, erase_x1 = 0;
  // The automatic augmentation's and colour jitter's program (ops::augment_images rows), run
  // on the cropped and flipped pixels: rows [0, op_count) of `ops`.
  static constexpr int64_t kMaxOps = 8;
  std::array<ImageOp, kMaxOps> ops{};
  int64_t op_count = 0;
};

// The pixels an augmentation blanks (its cutout square or its erased rectangle): rows [y0, y1)
// and columns [x0, x1) of the output, within the image; empty (y0 == y1, x0 == x1) when none.
struct BlankedBox {
  int64_t y0 = 0, x0 = 0, y1 = 0, x1 = 0;
};

// A TransformOptions checked against an image shape, with the normalisation precomputed.
class ImageTransform {
 public:
  // InvalidInput if mean/std have neither 0, 1 nor `channels` entries, a std is not positive
  // and finite, crop_padding or cutout is negative or larger than the image's shorter side, or
  // random erasing is set with cutout or with a probability, scales or ratios out of range
  // (probability in [0, 1], 0 < scale_min <= scale_max <= 1, 0 < ratio_min <= ratio_max), or
  // an automatic augmentation or colour jitter has settings out of range (bins in [2, 100],
  // RandAugment's ops in [1, 4] and magnitude in [0, bins), jitter factors non-negative and
  // finite, hue at most 0.5) or images of other than 1 or 3 channels.
  ImageTransform(const TransformOptions& options, int64_t height, int64_t width, int64_t channels);

  // The augmentation of sample `sample` in epoch `epoch`: shifts uniform in
  // [-crop_padding, crop_padding], flip with probability 1/2 (off when disabled), cutout centre
  // uniform over the image, then random erasing (each drawn after the others, so the crops and
  // flips of a seed do not depend on the cutout or erasing options), then the automatic
  // augmentation's and colour jitter's program (image_augment.h's draw_program).
  Augmentation draw(uint64_t seed, int64_t epoch, int64_t sample) const;
  // The same sample seen in a mirror: the flip toggled and the cutout square or erased rectangle
  // mirrored with it, so apply() gives the image of `aug` mirrored horizontally, bit for bit
  // when `aug` has no program (evaluation's test-time flip; the program is kept as it is).
  Augmentation mirrored(const Augmentation& aug) const;
  // The output pixels the cutout or random erasing of `aug` blanks.
  BlankedBox blanked_box(const Augmentation& aug) const;

  // The most program rows a sample draws (0 without an automatic augmentation or jitter).
  int64_t program_rows() const { return program_rows_; }

  // Writes the H*W*C transformed floats of one uint8 HWC image to out.
  void apply(const uint8_t* image, const Augmentation& aug, float* out) const;
  // The same before normalisation: the H*W*C uint8 pixel values (padding and blanked pixels 0),
  // which table() turns into apply()'s floats bit for bit.
  void apply(const uint8_t* image, const Augmentation& aug, uint8_t* out) const;
  // Normalises H*W*C pixel values held as floats in [0, 255] in place, as apply() does (for
  // images resized in f32 before normalisation).
  void normalize(float* values) const;

  int64_t height() const { return height_; }
  int64_t width() const { return width_; }
  int64_t channels() const { return channels_; }
  const TransformOptions& options() const { return options_; }
  // The normalisation as a table: entry c * 256 + v is the f32 value of value v in channel c,
  // v * scale[c] + bias[c] computed once here, so every path (this class, ops::gather_batch on
  // any device) gives the same bits. A padding pixel, and a blanked pixel, is value 0.
  const std::vector<float>& table() const { return table_; }
  // normalize()'s per-channel factors: value v of channel c becomes v * scale()[c] + bias()[c].
  const std::vector<float>& scale() const { return scale_; }
  const std::vector<float>& bias() const { return bias_; }

 private:
  // Random erasing's draws (after the others) into aug.erase_*.
  void draw_erasing(RandomStream& rs, Augmentation& aug) const;

  // The crop and flip of `aug`, its program run (ops::augment_images on the CPU) and the
  // blanked box written through value(channel, pixel value) into out.
  template <typename T, typename Value>
  void apply_program(const uint8_t* image, const Augmentation& aug, T* out,
                     const Value& value) const;

  TransformOptions options_;
  int64_t height_, width_, channels_;
  int64_t program_rows_ = 0;
  std::vector<float> table_;  // [channels, 256]: v / (255 std[c]) - mean[c] / std[c]
  // Per channel, for normalize(): the table's v * scale[c] + bias[c] on any float v.
  std::vector<float> scale_, bias_;
};

}  // namespace hg::data
