// The validation hold-out: stratified shares, a partition of the samples, the same samples for
// the same seed, different ones for another.
#include "hourglass/data/holdout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "hourglass/base/error.h"

namespace hg::data {
namespace {

// n samples of 2x2x1 images; sample i has label labels[i] and every pixel equal to i % 256,
// plus a second pixel byte i / 256 so that each sample is identifiable.
ImageDataset numbered(const std::vector<uint8_t>& labels, int64_t classes) {
  ImageDataset ds;
  ds.name = "numbered";
  ds.source = "memory";
  ds.height = 2;
  ds.width = 2;
  ds.channels = 1;
  ds.num_classes = classes;
  ds.labels = labels;
  for (size_t i = 0; i < labels.size(); ++i)
    for (uint8_t v : {uint8_t(i % 256), uint8_t(i / 256), uint8_t(7), uint8_t(9)})
      ds.pixels.push_back(v);
  return ds;
}

int64_t id_of(const ImageDataset& ds, int64_t i) {
  const uint8_t* p = ds.image(i);
  return int64_t(p[0]) + 256 * int64_t(p[1]);
}

std::vector<int64_t> ids(const ImageDataset& ds) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < ds.size(); ++i) out.push_back(id_of(ds, i));
  return out;
}

// 1000 samples: class c has 100 * (c + 1) samples for c < 4 (100, 200, 300, 400).
ImageDataset uneven() {
  std::vector<uint8_t> labels;
  for (uint8_t c = 0; c < 4; ++c)
    for (int i = 0; i < 100 * (c + 1); ++i) labels.push_back(c);
  // Interleave the classes so that a split by position would not be stratified.
  std::vector<uint8_t> mixed;
  for (size_t i = 0; i < labels.size(); ++i) mixed.push_back(labels[(i * 7919) % labels.size()]);
  return numbered(mixed, 4);
}

TEST(HoldOut, EachClassKeepsItsShareAndTheSamplesArePartitioned) {
  const ImageDataset ds = uneven();
  const HeldOut h = hold_out(ds, 0.1, 42);
  std::map<int, int> val_per_class, all_per_class;
  for (uint8_t l : ds.labels) ++all_per_class[l];
  for (uint8_t l : h.validation.labels) ++val_per_class[l];
  for (const auto& [c, n] : all_per_class) EXPECT_EQ(val_per_class[c], n / 10) << "class " << c;
  EXPECT_EQ(h.validation.size(), 100);
  EXPECT_EQ(h.train.size(), 900);
  // Every sample is in exactly one part, with its own label and pixels.
  std::vector<int64_t> all = ids(h.train), val = ids(h.validation);
  all.insert(all.end(), val.begin(), val.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < ds.size(); ++i) ASSERT_EQ(all[size_t(i)], i);
  for (const ImageDataset* part : {&h.train, &h.validation}) {
    ASSERT_EQ(part->pixels.size(), size_t(part->size() * part->image_bytes()));
    for (int64_t i = 0; i < part->size(); ++i)
      EXPECT_EQ(part->labels[size_t(i)], ds.labels[size_t(id_of(*part, i))]);
    EXPECT_EQ(part->num_classes, 4);
    EXPECT_EQ(part->height, 2);
  }
  // The original order is kept within each part.
  EXPECT_TRUE(std::is_sorted(val.begin(), val.end()));
  EXPECT_NE(h.validation.source.find("validation"), std::string::npos);
}

TEST(HoldOut, TheSeedDecidesTheSamples) {
  const ImageDataset ds = uneven();
  EXPECT_EQ(ids(hold_out(ds, 0.2, 7).validation), ids(hold_out(ds, 0.2, 7).validation));
  EXPECT_NE(ids(hold_out(ds, 0.2, 7).validation), ids(hold_out(ds, 0.2, 8).validation));
}

TEST(HoldOut, FractionZeroHoldsOutNothingAndBadFractionsAreRefused) {
  const ImageDataset ds = uneven();
  const HeldOut h = hold_out(ds, 0.0, 1);
  EXPECT_EQ(h.validation.size(), 0);
  EXPECT_EQ(ids(h.train).size(), size_t(ds.size()));
  for (double bad : {-0.1, 1.0, 1.5}) EXPECT_THROW(hold_out(ds, bad, 1), Error) << bad;
}

TEST(HoldOut, ASmallClassRoundsToTheNearestCount) {
  // 3 samples of class 0 and 5 of class 1 at 0.5: round(1.5) = 2 and round(2.5) = 3.
  const HeldOut h = hold_out(numbered({0, 0, 0, 1, 1, 1, 1, 1}, 2), 0.5, 3);
  EXPECT_EQ(std::count(h.validation.labels.begin(), h.validation.labels.end(), 0), 2);
  EXPECT_EQ(std::count(h.validation.labels.begin(), h.validation.labels.end(), 1), 3);
}

}  // namespace
}  // namespace hg::data
