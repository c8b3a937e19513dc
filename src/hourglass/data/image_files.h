// Samples that are image files decoded as the loader reads them: the files of an image folder
// (image_folder.h) or the records of a pack (image_pack.h), behind EncodedImages, and the
// SampleSource that decodes, crops, resizes and normalises them on the loader's workers.
//
// Training (augment): torchvision's RandomResizedCrop(image_size) and a horizontal flip, drawn
// per (seed, epoch, sample); with progressive resizing (ImageSizeRamp) the crop's side is the
// epoch's. Evaluation: the shorter side resized to round(image_size * 256 /
// 224), then the centre image_size x image_size. Resizing is bilinear without antialiasing
// (image_resize.h). Every sample is RGB, image_size x image_size x 3: the resize's values
// normalised, or rounded to uint8 pixel values (SampleSource's second write()). A JPEG is decoded
// only where the resize reads it (the crop's box, evaluation's centre window), at the smallest
// DCT scaling that keeps the crop at least image_size (image_decode.h).
//
// A file that cannot be read or decoded is reported once (a warning naming it and the reason) and
// counted in skipped(), and write() returns false for it; the loader then takes the next sample.
// Each write reads the file again: a JPEG is decoded only down to the sample's crop, so whether a
// file damaged in its lower part fails is a function of (seed, epoch, sample), as the batches
// must be for a resumed run to see the same ones.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/data/image_folder.h"
#include "hourglass/data/image_resize.h"
#include "hourglass/data/image_size_ramp.h"
#include "hourglass/data/sample_source.h"

namespace hg::data {

// Encoded images addressed by index.
class EncodedImages {
 public:
  virtual ~EncodedImages() = default;
  virtual int64_t size() const = 0;
  virtual int64_t label(int64_t index) const = 0;
  virtual const std::vector<std::string>& classes() const = 0;
  // Names sample `index` in messages (its path, or its pack record).
  virtual std::string where(int64_t index) const = 0;
  // Its encoded bytes; InvalidInput naming where(index) when they cannot be read.
  virtual std::vector<uint8_t> read(int64_t index) const = 0;
  // What the images are read from, for messages.
  virtual std::string source() const = 0;
};

// The files of a scanned image folder.
class FolderImages final : public EncodedImages {
 public:
  explicit FolderImages(ImageFolderIndex index) : index_(std::move(index)) {}
  int64_t size() const override { return int64_t(index_.samples.size()); }
  int64_t label(int64_t i) const override { return index_.samples[size_t(i)].label; }
  const std::vector<std::string>& classes() const override { return index_.classes; }
  std::string where(int64_t i) const override { return index_.samples[size_t(i)].path; }
  std::vector<uint8_t> read(int64_t i) const override;
  std::string source() const override { return index_.root; }

 private:
  ImageFolderIndex index_;
};

struct ImageFileOptions {
  int64_t image_size = 224;  // side of the square samples, in [8, 4096]
  // Training with progressive resizing: the samples of epoch e are ramp.side_at(e) square
  // (ramp.end_size is image_size); height() and width() stay image_size, the largest.
  ImageSizeRamp ramp;
  ResizedCropOptions crop;  // RandomResizedCrop's scale and ratio ranges
  bool flip = true;         // random horizontal flip when augmenting
  // Evaluation's resize antialiased (resize_antialiased, as PIL's and torchvision's) rather
  // than plain bilinear (data.eval_antialias); training crops always resize plain.
  bool eval_antialias = true;
  int64_t limit = 0;  // > 0: only the first `limit` images
  std::string name = "folder";
};

class ImageFileSource final : public SampleSource {
 public:
  // InvalidInput for a null or empty set of images, or an image_size outside [8, 4096].
  ImageFileSource(std::shared_ptr<const EncodedImages> images, ImageFileOptions options);

  int64_t size() const override { return size_; }
  int64_t height() const override { return options_.image_size; }
  int64_t width() const override { return options_.image_size; }
  int64_t height_at(int64_t epoch) const override { return side_at(epoch); }
  int64_t width_at(int64_t epoch) const override { return side_at(epoch); }
  int64_t channels() const override { return 3; }
  int64_t num_classes() const override { return int64_t(images_->classes().size()); }
  std::string name() const override { return options_.name; }
  std::string source() const override { return images_->source(); }
  bool write(int64_t index, const SampleRequest& request, float* out, float* mirrored,
             int64_t* label) const override;
  bool write(int64_t index, const SampleRequest& request, uint8_t* out, uint8_t* mirrored,
             int64_t* label) const override;
  int64_t skipped() const override { return skipped_.load(std::memory_order_relaxed); }

  const std::vector<std::string>& classes() const { return images_->classes(); }
  const EncodedImages& images() const { return *images_; }
  // The side of epoch `epoch`'s samples: the ramp's, or image_size.
  int64_t side_at(int64_t epoch) const {
    return options_.ramp.enabled() ? options_.ramp.side_at(epoch) : options_.image_size;
  }

 private:
  template <typename T>
  bool write_as(int64_t index, const SampleRequest& request, T* out, T* mirrored,
                int64_t* label) const;

  std::shared_ptr<const EncodedImages> images_;
  ImageFileOptions options_;
  int64_t size_ = 0;
  // One flag per sample: found unreadable (set once; the one that sets it reports it).
  std::unique_ptr<std::atomic<bool>[]> bad_;
  mutable std::atomic<int64_t> skipped_{0};
};

// InvalidInput naming both sources when train and test do not hold the same class names in
// the same order (a label would mean different classes in the two splits).
void require_same_classes(const ImageFileSource& train, const ImageFileSource& test);

}  // namespace hg::data
