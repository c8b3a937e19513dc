// Progressive resizing (FFCV's ResNet recipes): the side of a run's training images per epoch,
// small at first and growing to the evaluation's size (data.start_image_size,
// data.image_size_ramp, data.image_size_multiple; ImageFileOptions::ramp).
#pragma once

#include <cstdint>
#include <vector>

namespace hg::data {

// The side of the training samples per epoch, as FFCV's get_resolution: start_size through epoch
// first_epoch, end_size from epoch last_epoch on, and between them np.interp's line rounded to
// the nearest multiple of `multiple` (a half to the even multiple, as np.round). Epochs count
// from 0 (the number of epochs before it). Off (start_size 0): end_size always.
struct ImageSizeRamp {
  int64_t start_size = 0;
  int64_t end_size = 0;
  int64_t first_epoch = 0, last_epoch = 0;
  int64_t multiple = 32;

  bool enabled() const { return start_size > 0; }
  int64_t side_at(int64_t epoch) const;
  // The distinct sides of epochs [0, epochs), in the order they first appear.
  std::vector<int64_t> sides(int64_t epochs) const;
};

}  // namespace hg::data
