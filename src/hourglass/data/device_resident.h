// A dataset held on the device it trains on: its uint8 pixels and labels uploaded once, and
// each batch gathered, augmented and normalised there by one kernel (ops::gather_batch) from
// the epoch's sample order and augmentations, which are drawn on the host once per epoch
// (ImageTransform::draw: the same crops, flips and cutouts as the host path, for the same
// seed) and uploaded with it. No per-step host work but the launch; the loader's worker threads
// are not used. With an automatic augmentation or colour jitter, a batch is three launches:
// the crops' pixels gathered, their programs run (ops::augment_images), then the values and
// blanked boxes gathered, as the host path applies them. CIFAR-10's training set takes 150 MB of
// device memory this way.
#pragma once

#include <cstdint>
#include <vector>

#include "hourglass/data/dataset.h"
#include "hourglass/data/transforms.h"
#include "hourglass/tensor/tensor.h"

namespace hg::data {

struct Batch;

class DeviceResidentSet {
 public:
  // Uploads `ds` and the normalisation of `transform` to `device`.
  DeviceResidentSet(const ImageDataset& ds, const ImageTransform& transform, Device device);

  // Uploads epoch `epoch`'s sample order and, when `augment`, the augmentation of each
  // position's sample (transform.draw(seed, epoch, sample)); when `mirror`, the same mirrored
  // (ImageTransform::mirrored: the flip toggled, the cutout mirrored), for Batch::mirrored.
  void start_epoch(const std::vector<int64_t>& order, const ImageTransform& transform, bool augment,
                   bool mirror, uint64_t seed, int64_t epoch);
  // Positions [begin, begin + count) of the current epoch's order as batch `index`, on the
  // device (images f32 [count,H,W,C], labels i64 [count]; mirrored images too when `mirror`).
  Batch batch(int64_t epoch, int64_t index, int64_t begin, int64_t count, bool mirror) const;

  // Bytes the dataset takes on the device (pixels and labels).
  int64_t bytes() const { return int64_t(images_.nbytes() + labels_.nbytes()); }
  Device device() const { return images_.device(); }

 private:
  Tensor images_, labels_, table_;
  // The current epoch's order, augmentations (undefined when not augmenting) and mirrored
  // augmentations (undefined unless mirroring).
  Tensor order_, augment_, mirror_;
  // With a program: each position's rows (f32 [n, rows, kImageOpWidth]) and its blanked box
  // (the gather rows' last four; augment_ and mirror_ then hold the crops and flips alone).
  Tensor program_, blank_, mirror_blank_;
};

}  // namespace hg::data
