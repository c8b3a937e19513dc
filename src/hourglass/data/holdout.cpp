#include "hourglass/data/holdout.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"

namespace hg::data {

namespace {

// Keeps the validation stream apart from other users of the run's seed.
constexpr uint64_t kHoldOutTag = 0x76616c5f73706c74ull;  // "val_splt"

ImageDataset empty_like(const ImageDataset& ds, const char* part) {
  ImageDataset out;
  out.name = ds.name;
  out.source = ds.source + " (" + part + ")";
  out.height = ds.height;
  out.width = ds.width;
  out.channels = ds.channels;
  out.num_classes = ds.num_classes;
  return out;
}

void append_sample(const ImageDataset& from, int64_t index, ImageDataset& to) {
  const uint8_t* image = from.image(index);
  to.pixels.insert(to.pixels.end(), image, image + from.image_bytes());
  to.labels.push_back(from.labels[size_t(index)]);
}

}  // namespace

HeldOut hold_out(const ImageDataset& ds, double fraction, uint64_t seed) {
  HG_CHECK(std::isfinite(fraction) && fraction >= 0 && fraction < 1,
           "hold_out: fraction {} is not in [0, 1)", fraction);
  std::vector<std::vector<int64_t>> by_class(size_t(std::max<int64_t>(ds.num_classes, 0)));
  for (int64_t i = 0; i < ds.size(); ++i) {
    const size_t label = ds.labels[size_t(i)];
    HG_CHECK(label < by_class.size(), "hold_out: label {} of sample {} is not below {} classes",
             label, i, by_class.size());
    by_class[label].push_back(i);
  }
  std::vector<char> held(size_t(ds.size()), 0);
  for (size_t c = 0; c < by_class.size(); ++c) {
    std::vector<int64_t>& indices = by_class[c];
    const auto count = int64_t(std::llround(fraction * double(indices.size())));
    // The first `count` places of a Fisher-Yates shuffle: a uniform choice of `count` indices.
    RandomStream rng(seed, mix_stream(kHoldOutTag, c));
    for (int64_t i = 0; i < count; ++i) {
      const auto j = i + int64_t(rng.below(uint64_t(int64_t(indices.size()) - i)));
      std::swap(indices[size_t(i)], indices[size_t(j)]);
      held[size_t(indices[size_t(i)])] = 1;
    }
  }
  HeldOut out{empty_like(ds, "training part"), empty_like(ds, "validation part")};
  for (int64_t i = 0; i < ds.size(); ++i)
    append_sample(ds, i, held[size_t(i)] ? out.validation : out.train);
  return out;
}

}  // namespace hg::data
