// Where a DataLoader's samples come from. A SampleSource knows how many labelled samples it
// holds, the shape of each after its transform, and writes one sample at a time as normalised
// f32 HWC, or as uint8 HWC pixel values that its transform's table normalises later: the
// in-memory datasets (IDX, CIFAR-10, synthetic: InMemorySource, below) and the
// image files of a folder or pack (image_files.h), which decode on the loader's workers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hourglass/data/dataset.h"
#include "hourglass/data/transforms.h"

namespace hg::data {

// The share of a source's samples that may be unreadable before a loader stops
// (LoaderOptions::max_unreadable, data.max_unreadable).
inline constexpr double kDefaultMaxUnreadable = 0.1;

// What a sample is written for: the loader's seed, the epoch, whether to augment, and the
// loader's normalisation (an ImageTransform checked against the source's shape).
struct SampleRequest {
  uint64_t seed = 0;
  int64_t epoch = 0;
  bool augment = false;
  const ImageTransform* transform = nullptr;
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;

  virtual int64_t size() const = 0;
  // The shape of every sample write() produces, and the number of classes.
  virtual int64_t height() const = 0;
  virtual int64_t width() const = 0;
  virtual int64_t channels() const = 0;
  virtual int64_t num_classes() const = 0;
  // The shape of the samples written for requests of epoch `epoch`: height() x width(), unless
  // the source resizes its samples per epoch (progressive resizing, image_files.h), where
  // height() and width() are the largest.
  virtual int64_t height_at(int64_t /*epoch*/) const { return height(); }
  virtual int64_t width_at(int64_t /*epoch*/) const { return width(); }
  // The dataset's name and where it was read from (for messages and logs).
  virtual std::string name() const = 0;
  virtual std::string source() const = 0;

  // Writes sample `index` (in [0, size())) as height_at(request.epoch) x width_at(request.epoch)
  // x channels normalised floats to `out` and its label to `label`, its random choices a pure
  // function of (request.seed, request.epoch, index); when `mirrored` is not null, also the same
  // sample mirrored (the flip inverted: LoaderOptions::mirror) there. Returns false when the sample
  // cannot be read (a corrupt or missing image file): the source then reports it (once per sample,
  // naming the file) and counts it in skipped(). Called concurrently from the loader's workers.
  virtual bool write(int64_t index, const SampleRequest& request, float* out, float* mirrored,
                     int64_t* label) const = 0;
  // The same as uint8 pixel values, not yet normalised (BatchPixels::Uint8 in loader.h):
  // request.transform->table() maps them to normalised floats. In-memory samples then normalise
  // to the first write()'s floats bit for bit; image files, resized, are rounded to whole pixel
  // values first (as an image library's resize hands them back), so they differ from the first
  // write()'s by less than half a pixel level.
  virtual bool write(int64_t index, const SampleRequest& request, uint8_t* out, uint8_t* mirrored,
                     int64_t* label) const = 0;

  // The number of distinct samples found unreadable so far (0 for data held in memory).
  virtual int64_t skipped() const { return 0; }
};

// An ImageDataset as a SampleSource: the loader's crop-with-padding and flip (ImageTransform)
// over the uint8 pixels held in memory. Never skips.
class InMemorySource final : public SampleSource {
 public:
  // InvalidInput for a null dataset, an empty image shape, pixels that do not match the
  // shape and size, or a label outside [0, num_classes).
  explicit InMemorySource(std::shared_ptr<const ImageDataset> dataset);

  int64_t size() const override { return dataset_->size(); }
  int64_t height() const override { return dataset_->height; }
  int64_t width() const override { return dataset_->width; }
  int64_t channels() const override { return dataset_->channels; }
  int64_t num_classes() const override { return dataset_->num_classes; }
  std::string name() const override { return dataset_->name; }
  std::string source() const override { return dataset_->source; }
  bool write(int64_t index, const SampleRequest& request, float* out, float* mirrored,
             int64_t* label) const override;
  bool write(int64_t index, const SampleRequest& request, uint8_t* out, uint8_t* mirrored,
             int64_t* label) const override;

  const ImageDataset& dataset() const { return *dataset_; }

 private:
  template <typename T>
  bool write_as(int64_t index, const SampleRequest& request, T* out, T* mirrored,
                int64_t* label) const;

  std::shared_ptr<const ImageDataset> dataset_;
};

}  // namespace hg::data
