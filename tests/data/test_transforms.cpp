// Transforms: the flip mirrors exactly, the crop shifts and fills with zero pixels, cutout
// blanks its clipped square after both, the normalisation gives (p / 255 - mean) / std, and the
// random draws are a pure function of (seed, epoch, sample) with the intended distribution (the
// crops and flips the same with and without cutout).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>

#include "data/fixtures.h"
#include "hourglass/base/rng.h"
#include "hourglass/data/transforms.h"
#include "hourglass/ops/ops.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace hg::data {
namespace {

using test::fails_with;

constexpr int64_t kH = 5, kW = 6, kC = 2;

std::vector<uint8_t> test_image() {
  std::vector<uint8_t> img(size_t(kH * kW * kC));
  for (size_t i = 0; i < img.size(); ++i) img[i] = uint8_t(10 + i * 3);
  return img;
}

// The input pixel at (y, x, c), or 0 outside the image: the padded image.
float padded(const std::vector<uint8_t>& img, int64_t y, int64_t x, int64_t c) {
  if (y < 0 || y >= kH || x < 0 || x >= kW) return 0.0f;
  return float(img[size_t((y * kW + x) * kC + c)]);
}

std::vector<float> run(const ImageTransform& t, const std::vector<uint8_t>& img,
                       const Augmentation& aug) {
  std::vector<float> out(size_t(kH * kW * kC), -1e9f);
  t.apply(img.data(), aug, out.data());
  return out;
}

TEST(DataTransforms, IdentityScalesTo01) {
  const ImageTransform t({}, kH, kW, kC);
  const auto img = test_image();
  const auto out = run(t, img, {});
  for (size_t i = 0; i < img.size(); ++i) EXPECT_FLOAT_EQ(out[i], float(img[i]) / 255.0f);
}

TEST(DataTransforms, FlipMirrorsExactly) {
  const ImageTransform t({.flip = true}, kH, kW, kC);
  const auto img = test_image();
  const auto out = run(t, img, {.flip = true});
  const auto plain = run(t, img, {});
  for (int64_t y = 0; y < kH; ++y) {
    for (int64_t x = 0; x < kW; ++x) {
      for (int64_t c = 0; c < kC; ++c) {
        // Bit-exact: the same pixel through the same arithmetic.
        EXPECT_EQ(out[size_t((y * kW + x) * kC + c)],
                  plain[size_t((y * kW + (kW - 1 - x)) * kC + c)]);
      }
    }
  }
  // Flipping twice is the identity.
  std::vector<uint8_t> flipped(img.size());
  for (size_t i = 0; i < img.size(); ++i) flipped[i] = uint8_t(std::lround(out[i] * 255.0f));
  EXPECT_EQ(run(t, flipped, {.flip = true}), plain);
}

TEST(DataTransforms, CropShiftsAndZeroFills) {
  const ImageTransform t({.crop_padding = 2}, kH, kW, kC);
  const auto img = test_image();
  for (int64_t dy = -2; dy <= 2; ++dy) {
    for (int64_t dx = -2; dx <= 2; ++dx) {
      const auto out = run(t, img, {.shift_y = dy, .shift_x = dx});
      for (int64_t y = 0; y < kH; ++y) {
        for (int64_t x = 0; x < kW; ++x) {
          for (int64_t c = 0; c < kC; ++c) {
            ASSERT_FLOAT_EQ(out[size_t((y * kW + x) * kC + c)],
                            padded(img, y + dy, x + dx, c) / 255.0f)
                << "shift " << dy << "," << dx << " at " << y << "," << x << "," << c;
          }
        }
      }
    }
  }
  // A concrete case: shifting down-right by (1, 2) moves pixel (1, 2) to the corner and
  // leaves the last row and last two columns as zero padding.
  const auto out = run(t, img, {.shift_y = 1, .shift_x = 2});
  EXPECT_FLOAT_EQ(out[0], float(img[size_t((1 * kW + 2) * kC)]) / 255.0f);
  for (int64_t x = 0; x < kW; ++x) EXPECT_EQ(out[size_t(((kH - 1) * kW + x) * kC)], 0.0f);
  for (int64_t y = 0; y < kH; ++y) EXPECT_EQ(out[size_t((y * kW + kW - 1) * kC + 1)], 0.0f);
}

TEST(DataTransforms, CropThenFlip) {
  const ImageTransform t({.crop_padding = 2, .flip = true}, kH, kW, kC);
  const auto img = test_image();
  const auto out = run(t, img, {.shift_y = -1, .shift_x = 1, .flip = true});
  for (int64_t y = 0; y < kH; ++y) {
    for (int64_t x = 0; x < kW; ++x) {
      for (int64_t c = 0; c < kC; ++c) {
        // Cropped column kW-1-x of the shifted image.
        EXPECT_FLOAT_EQ(out[size_t((y * kW + x) * kC + c)],
                        padded(img, y - 1, (kW - 1 - x) + 1, c) / 255.0f);
      }
    }
  }
}

TEST(DataTransforms, NormalisesPerChannel) {
  const std::vector<float> mean = {0.5f, 0.25f}, stdev = {0.5f, 2.0f};
  const ImageTransform t({.crop_padding = 1, .mean = mean, .std = stdev}, kH, kW, kC);
  const auto img = test_image();
  const auto out = run(t, img, {.shift_y = 1});
  for (int64_t y = 0; y < kH; ++y) {
    for (int64_t x = 0; x < kW; ++x) {
      for (int64_t c = 0; c < kC; ++c) {
        const double p = padded(img, y + 1, x, c);  // the last row is padding: pixel 0
        const double want = (p / 255.0 - mean[size_t(c)]) / stdev[size_t(c)];
        EXPECT_NEAR(out[size_t((y * kW + x) * kC + c)], want, 1e-6);
      }
    }
  }
  // Padding is a zero pixel normalised: -mean / std.
  EXPECT_FLOAT_EQ(out[size_t(((kH - 1) * kW) * kC + 0)], -1.0f);
  EXPECT_FLOAT_EQ(out[size_t(((kH - 1) * kW) * kC + 1)], -0.125f);
  // One value broadcasts to every channel.
  const ImageTransform one({.mean = {0.5f}, .std = {0.5f}}, kH, kW, kC);
  const auto o = run(one, img, {});
  EXPECT_NEAR(o[1], (img[1] / 255.0 - 0.5) / 0.5, 1e-6);
}

TEST(DataTransforms, RejectsBadOptions) {
  EXPECT_TRUE(fails_with(
      [] {
        ImageTransform({.mean = {0.1f, 0.2f, 0.3f}}, kH, kW, kC);
      },
      {"data.mean has 3 values", "2 channels", "one value for every channel, or 2 values"}));
  EXPECT_TRUE(fails_with(
      [] {
        ImageTransform({.std = {0.5f, 0.5f}}, kH, kW, 1);
      },
      {"data.std has 2 values but the images have 1 channel (set it to one value for every "
       "channel)"}));
  EXPECT_TRUE(fails_with(
      [] {
        ImageTransform({.std = {1.0f, 0.0f}}, kH, kW, kC);
      },
      {"data.std[1]", "positive"}));
  EXPECT_TRUE(fails_with([] { ImageTransform({.crop_padding = -1}, kH, kW, kC); },
                         {"data.crop_padding = -1"}));
  EXPECT_TRUE(fails_with([] { ImageTransform({.crop_padding = 6}, kH, kW, kC); },
                         {"data.crop_padding = 6", "5x6", "[0, 5]"}));
  EXPECT_TRUE(
      fails_with([] { ImageTransform({.cutout = -1}, kH, kW, kC); }, {"data.cutout", "-1"}));
  EXPECT_TRUE(fails_with([] { ImageTransform({.cutout = 6}, kH, kW, kC); },
                         {"data.cutout", "[0, 5]", "5x6"}));
  EXPECT_NO_THROW(ImageTransform({.cutout = 5}, kH, kW, kC));
}

// The augmentation of (seed, epoch, sample) replayed from its Philox stream, written from the
// documentation rather than the implementation: crop shifts, flip, then the cutout centre.
struct Replayed {
  int64_t shift_y, shift_x;
  bool flip;
  int64_t cutout_y, cutout_x;
};
Replayed replay(uint64_t seed, int64_t epoch, int64_t sample, int64_t padding, int64_t height,
                int64_t width) {
  RandomStream rs(seed, mix_stream(uint64_t(epoch), uint64_t(sample), 0x4155474D454E5400ull));
  Replayed r{};
  r.shift_y = int64_t(rs.below(uint64_t(2 * padding + 1))) - padding;
  r.shift_x = int64_t(rs.below(uint64_t(2 * padding + 1))) - padding;
  r.flip = rs.uniform() < 0.5f;
  r.cutout_y = int64_t(rs.below(uint64_t(height)));
  r.cutout_x = int64_t(rs.below(uint64_t(width)));
  return r;
}

// Against a float64 reference: the pixel the crop and flip bring to (y, x), normalised, except
// inside the square of side s whose centre the replayed stream gives, clipped to the image,
// which holds the padding value (pixel 0 normalised). Samples whose square touches a border are
// among those checked.
TEST(DataTransforms, CutoutBlanksExactlyTheClippedSquare) {
  const std::vector<float> mean = {0.5f, 0.25f}, stdev = {0.5f, 2.0f};
  for (int64_t side : {1, 2, 3, 4}) {
    const ImageTransform t(
        {.crop_padding = 2, .flip = true, .cutout = side, .mean = mean, .std = stdev}, kH, kW, kC);
    const auto img = test_image();
    int clipped = 0, flipped = 0;
    for (int64_t sample = 0; sample < 60; ++sample) {
      const Augmentation aug = t.draw(9, 4, sample);
      const Replayed r = replay(9, 4, sample, 2, kH, kW);
      ASSERT_EQ(aug.shift_y, r.shift_y);
      ASSERT_EQ(aug.shift_x, r.shift_x);
      ASSERT_EQ(aug.flip, r.flip);
      // The square, from its centre: rows [cy - s/2, cy - s/2 + s) within [0, H).
      const int64_t y0 = std::max<int64_t>(r.cutout_y - side / 2, 0);
      const int64_t y1 = std::min<int64_t>(r.cutout_y - side / 2 + side, kH);
      const int64_t x0 = std::max<int64_t>(r.cutout_x - side / 2, 0);
      const int64_t x1 = std::min<int64_t>(r.cutout_x - side / 2 + side, kW);
      clipped += (y1 - y0) * (x1 - x0) < side * side;
      flipped += r.flip;
      const auto out = run(t, img, aug);
      int64_t blanked = 0;
      for (int64_t y = 0; y < kH; ++y) {
        for (int64_t x = 0; x < kW; ++x) {
          const bool inside = y >= y0 && y < y1 && x >= x0 && x < x1;
          blanked += inside;
          for (int64_t c = 0; c < kC; ++c) {
            const double p =
                inside ? 0.0 : padded(img, y + r.shift_y, (r.flip ? kW - 1 - x : x) + r.shift_x, c);
            const double want = (p / 255.0 - mean[size_t(c)]) / stdev[size_t(c)];
            ASSERT_NEAR(out[size_t((y * kW + x) * kC + c)], want, 1e-6)
                << "side " << side << " sample " << sample << " at " << y << "," << x << "," << c;
          }
        }
      }
      EXPECT_EQ(blanked, (y1 - y0) * (x1 - x0));
    }
    EXPECT_GT(flipped, 0);
    if (side > 1) EXPECT_GT(clipped, 0) << "side " << side;  // the borders were exercised
  }
  // A concrete case: side 3 centred on the top-right pixel blanks rows 0-1, columns 4-5.
  const ImageTransform t({.cutout = 3}, kH, kW, kC);
  const auto img = test_image();
  const auto out = run(t, img, {.cutout_y = 0, .cutout_x = kW - 1, .cutout = 3});
  for (int64_t y = 0; y < kH; ++y) {
    for (int64_t x = 0; x < kW; ++x) {
      const bool inside = y <= 1 && x >= 4;
      for (int64_t c = 0; c < kC; ++c)
        EXPECT_FLOAT_EQ(out[size_t((y * kW + x) * kC + c)],
                        inside ? 0.0f : padded(img, y, x, c) / 255.0f)
            << y << "," << x << "," << c;
    }
  }
}

// Cutout is drawn after the crop and flip, so turning it on (any side) leaves every sample's
// shifts and flip as they were, and those are the draws of the stream as it always was.
TEST(DataTransforms, CutoutLeavesTheCropAndFlipDrawsUnchanged) {
  const ImageTransform off({.crop_padding = 3, .flip = true}, 32, 32, 3);
  const ImageTransform on({.crop_padding = 3, .flip = true, .cutout = 16}, 32, 32, 3);
  const ImageTransform small({.crop_padding = 3, .flip = true, .cutout = 1}, 32, 32, 3);
  std::set<int64_t> ys, xs;
  for (int64_t s = 0; s < 2000; ++s) {
    const Replayed r = replay(11, 2, s, 3, 32, 32);
    for (const ImageTransform* t : {&off, &on, &small}) {
      const Augmentation a = t->draw(11, 2, s);
      ASSERT_EQ(a.shift_y, r.shift_y) << "sample " << s;
      ASSERT_EQ(a.shift_x, r.shift_x) << "sample " << s;
      ASSERT_EQ(a.flip, r.flip) << "sample " << s;
    }
    const Augmentation a = on.draw(11, 2, s);
    EXPECT_EQ(off.draw(11, 2, s).cutout, 0);
    ASSERT_EQ(a.cutout, 16);
    ASSERT_EQ(a.cutout_y, r.cutout_y);
    ASSERT_EQ(a.cutout_x, r.cutout_x);
    ys.insert(a.cutout_y);
    xs.insert(a.cutout_x);
  }
  // The centre is uniform over the image: every row and column turns up.
  EXPECT_EQ(ys.size(), 32u);
  EXPECT_EQ(xs.size(), 32u);
  EXPECT_EQ(*ys.begin(), 0);
  EXPECT_EQ(*ys.rbegin(), 31);
}

// mirrored() toggles the flip and mirrors the cutout square with it (odd and even sides,
// squares clipped on either side): the image comes out read right to left, bit for bit.
TEST(DataTransforms, MirroredAugmentationMirrorsTheCutout) {
  const auto img = test_image();
  for (int64_t side = 1; side <= 5; ++side) {
    const ImageTransform t({.crop_padding = 1, .flip = true, .cutout = side}, kH, kW, kC);
    for (int64_t cy = 0; cy < kH; ++cy) {
      for (int64_t cx = 0; cx < kW; ++cx) {
        for (bool flip : {false, true}) {
          const Augmentation a{.shift_y = 1,
                               .shift_x = -1,
                               .flip = flip,
                               .cutout_y = cy,
                               .cutout_x = cx,
                               .cutout = side};
          const Augmentation m = t.mirrored(a);
          EXPECT_EQ(m.flip, !flip);
          const auto out = run(t, img, a), mirrored = run(t, img, m);
          for (int64_t y = 0; y < kH; ++y)
            for (int64_t x = 0; x < kW; ++x)
              for (int64_t c = 0; c < kC; ++c)
                ASSERT_EQ(mirrored[size_t((y * kW + x) * kC + c)],
                          out[size_t((y * kW + (kW - 1 - x)) * kC + c)])
                    << "side " << side << " centre " << cy << "," << cx << " at " << y << "," << x;
        }
      }
    }
  }
}

TEST(DataTransforms, DrawsArePureAndWellSpread) {
  const ImageTransform t({.crop_padding = 3, .flip = true}, 32, 32, 3);
  std::set<int64_t> ys, xs;
  int flips = 0;
  const int n = 4000;
  for (int s = 0; s < n; ++s) {
    const Augmentation a = t.draw(11, 2, s);
    const Augmentation b = t.draw(11, 2, s);
    ASSERT_EQ(a.shift_y, b.shift_y);
    ASSERT_EQ(a.shift_x, b.shift_x);
    ASSERT_EQ(a.flip, b.flip);
    ASSERT_GE(a.shift_y, -3);
    ASSERT_LE(a.shift_y, 3);
    ASSERT_GE(a.shift_x, -3);
    ASSERT_LE(a.shift_x, 3);
    ys.insert(a.shift_y);
    xs.insert(a.shift_x);
    flips += a.flip;
  }
  EXPECT_EQ(ys.size(), 7u);
  EXPECT_EQ(xs.size(), 7u);
  EXPECT_NEAR(double(flips) / n, 0.5, 0.04);
  // Other epochs and seeds give other draws.
  int same_epoch = 0, same_seed = 0;
  for (int s = 0; s < 200; ++s) {
    const Augmentation a = t.draw(11, 2, s), e = t.draw(11, 3, s), d = t.draw(12, 2, s);
    same_epoch += a.shift_y == e.shift_y && a.shift_x == e.shift_x && a.flip == e.flip;
    same_seed += a.shift_y == d.shift_y && a.shift_x == d.shift_x && a.flip == d.flip;
  }
  EXPECT_LT(same_epoch, 20);  // chance: 200 / 98
  EXPECT_LT(same_seed, 20);
}

TEST(DataTransforms, DisabledOptionsDrawNothing) {
  const ImageTransform none({}, 8, 8, 1);
  const ImageTransform crop_only({.crop_padding = 2}, 8, 8, 1);
  const ImageTransform both({.crop_padding = 2, .flip = true}, 8, 8, 1);
  for (int s = 0; s < 100; ++s) {
    const Augmentation a = none.draw(1, 0, s);
    EXPECT_EQ(a.shift_y, 0);
    EXPECT_EQ(a.shift_x, 0);
    EXPECT_FALSE(a.flip);
    EXPECT_FALSE(crop_only.draw(1, 0, s).flip);
    // Turning the flip on leaves the crop choices unchanged.
    EXPECT_EQ(crop_only.draw(1, 0, s).shift_x, both.draw(1, 0, s).shift_x);
  }
}

TEST(DataTransforms, DefaultsPerDataset) {
  const TransformOptions cifar = default_transform("cifar10");
  EXPECT_EQ(cifar.mean.size(), 3u);
  EXPECT_EQ(cifar.crop_padding, 4);
  EXPECT_TRUE(cifar.flip);
  const TransformOptions fm = default_transform("fashion-mnist");
  EXPECT_EQ(fm.mean.size(), 1u);
  EXPECT_FALSE(fm.flip);
  EXPECT_TRUE(default_transform("other").mean.empty());
}

// Random erasing against torchvision: the rectangles drawn for 20,000 samples of a 28x28 image
// (Fashion-MNIST's) have the height, width, top and left distributions of
// torchvision.transforms.RandomErasing.get_params (python3-torchvision, its own RNG), within
// a total variation distance of 0.05: sampling noise gives 0.014-0.020, an aspect ratio drawn
// uniform rather than log-uniform 0.21 in height and 0.09-0.11 in the corner's place.
TEST(DataTransforms, RandomErasingDrawsTorchvisionsRectangles) {
  constexpr int64_t kSide = 28, kCount = 20000;
  const std::string out = hg::test::fresh_temp_dir("erasing") + "/torchvision.json";
  const std::string cmd = fmt::format(
      "/usr/bin/python3 {}/tests/tools/torchvision_random_erasing.py {} {} {} 0.02 0.33 0.3 3.3 "
      "> {}",
      HG_SOURCE_DIR, kSide, kSide, kCount, out);
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << cmd << " failed (the test needs Debian's python3-torchvision: install-deps.sh --test)";
  const nlohmann::json ref = nlohmann::json::parse(hg::test::read_file(out));
  const ImageTransform t({.random_erasing = 1.0}, kSide, kSide, 1);
  std::map<std::string, std::vector<double>> ours, theirs;
  for (const char* key : {"h", "w", "y0", "x0"}) {
    ours[key].assign(kSide + 1, 0.0);
    theirs[key].assign(kSide + 1, 0.0);
    for (int64_t v : ref.at(key).get<std::vector<int64_t>>()) theirs[key][size_t(v)] += 1.0;
  }
  int64_t none = 0;
  for (int64_t s = 0; s < kCount; ++s) {
    const Augmentation a = t.draw(5, 1, s);
    const int64_t h = a.erase_y1 - a.erase_y0, w = a.erase_x1 - a.erase_x0;
    none += h == 0;
    // Inside the image, never the whole of it.
    ASSERT_TRUE(a.erase_y0 >= 0 && a.erase_x0 >= 0 && a.erase_y1 <= kSide && a.erase_x1 <= kSide);
    ASSERT_TRUE(h < kSide && w < kSide && (h == 0) == (w == 0));
    ours["h"][size_t(h)] += 1.0;
    ours["w"][size_t(w)] += 1.0;
    ours["y0"][size_t(a.erase_y0)] += 1.0;
    ours["x0"][size_t(a.erase_x0)] += 1.0;
  }
  for (const auto& [key, counts] : ours) {
    double tv = 0;
    for (size_t v = 0; v < counts.size(); ++v) tv += std::abs(counts[v] - theirs[key][v]);
    tv /= 2.0 * double(kCount);
    EXPECT_LT(tv, 0.05) << key << ": total variation distance to torchvision's";
  }
  // Every try fits a 28x28 image but the largest, elongated ones: few draws erase nothing.
  EXPECT_LT(none, kCount / 50);
}

// Erasing blanks exactly its rectangle with the padding value, after the crop and flip; it
// happens with its probability; the crops and flips are those drawn without it; a mirrored
// augmentation mirrors the rectangle (apply() then gives the mirror image, bit for bit).
TEST(DataTransforms, RandomErasingBlanksItsRectangle) {
  const ImageTransform plain({.crop_padding = 2, .flip = true}, kH, kW, kC);
  const ImageTransform t({.crop_padding = 2, .flip = true, .random_erasing = 0.5}, kH, kW, kC);
  const auto img = test_image();
  int erased = 0;
  constexpr int kSamples = 2000;
  for (int64_t sample = 0; sample < kSamples; ++sample) {
    const Augmentation a = t.draw(3, 2, sample), p = plain.draw(3, 2, sample);
    ASSERT_EQ(a.shift_y, p.shift_y);
    ASSERT_EQ(a.shift_x, p.shift_x);
    ASSERT_EQ(a.flip, p.flip);
    const BlankedBox box = t.blanked_box(a);
    erased += box.y1 > box.y0;
    const auto out = run(t, img, a), unerased = run(t, img, p);
    for (int64_t y = 0; y < kH; ++y) {
      for (int64_t x = 0; x < kW; ++x) {
        const bool inside = y >= a.erase_y0 && y < a.erase_y1 && x >= a.erase_x0 && x < a.erase_x1;
        for (int64_t c = 0; c < kC; ++c) {
          const size_t i = size_t((y * kW + x) * kC + c);
          ASSERT_EQ(out[i], inside ? 0.0f : unerased[i]) << sample << " at " << y << "," << x;
        }
      }
    }
    const auto mirrored = run(t, img, t.mirrored(a));
    for (int64_t y = 0; y < kH; ++y)
      for (int64_t x = 0; x < kW; ++x)
        for (int64_t c = 0; c < kC; ++c)
          ASSERT_EQ(mirrored[size_t((y * kW + x) * kC + c)],
                    out[size_t((y * kW + (kW - 1 - x)) * kC + c)])
              << sample << " mirrored at " << y << "," << x;
  }
  // Half the samples, within 5 standard deviations (about 0.056 of 2,000 draws).
  EXPECT_NEAR(double(erased) / kSamples, 0.5, 0.056);
  EXPECT_TRUE(fails_with([] { ImageTransform({.random_erasing = 1.5}, kH, kW, kC); },
                         {"data.random_erasing = 1.5"}));
  EXPECT_TRUE(fails_with([] { ImageTransform({.cutout = 2, .random_erasing = 0.5}, kH, kW, kC); },
                         {"data.random_erasing", "data.cutout"}));
  EXPECT_TRUE(fails_with(
      [] {
        ImageTransform({.random_erasing = 0.5, .erase_scale_min = 0.5, .erase_scale_max = 0.4}, kH,
                       kW, kC);
      },
      {"data.erase_scale"}));
  EXPECT_TRUE(
      fails_with([] { ImageTransform({.random_erasing = 0.5, .erase_ratio_min = 0}, kH, kW, kC); },
                 {"data.erase_ratio"}));
}

// ---- automatic augmentation and colour jitter (image_augment.h, ops::augment_images) ----

// A structured image: a gradient, a brighter square and noise, so that every op changes it.
std::vector<uint8_t> augment_test_image(int64_t h, int64_t w, int64_t c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> img(size_t(h * w * c));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t ch = 0; ch < c; ++ch) {
        const bool square = y > h / 4 && y < h / 2 && x > w / 3 && x < 2 * w / 3;
        const int64_t v =
            20 + 150 * x / w + 40 * y / h + 25 * ch + int64_t(rng() % 30) + (square ? 50 : 0);
        img[size_t((y * w + x) * c + ch)] = uint8_t(std::min<int64_t>(v, 255));
      }
  return img;
}

constexpr AugmentOp kAllAugmentOps[] = {
    AugmentOp::Identity,     AugmentOp::ShearX,    AugmentOp::ShearY,     AugmentOp::TranslateX,
    AugmentOp::TranslateY,   AugmentOp::Rotate,    AugmentOp::Brightness, AugmentOp::Color,
    AugmentOp::Contrast,     AugmentOp::Sharpness, AugmentOp::Posterize,  AugmentOp::Solarize,
    AugmentOp::AutoContrast, AugmentOp::Equalize};

bool resamples(AugmentOp op) {
  return op == AugmentOp::ShearX || op == AugmentOp::ShearY || op == AugmentOp::Rotate;
}

// Every op of TrivialAugmentWide's and RandAugment's spaces and the four ColorJitter ops, run by
// ops::augment_images (CPU) from the rows image_augment.h builds, against torchvision 0.14's own
// functions on the same uint8 images (python3-torchvision), on a 28x28 grayscale and a 32x32
// RGB image at several magnitudes of each sign. The photometric ops, translations, posterize,
// solarize, autocontrast and equalize agree bit for bit. Shears and rotations resample through
// an f32 grid whose nearest-pixel ties could round either way: at most 1% of their pixels may
// differ (measured: none of 231,360). The magnitude tables are torchvision's f32 values within
// an ulp.
TEST(ImageAugment, OpsAndMagnitudesMatchTorchvision) {
  struct Image {
    int64_t h, w, c;
    std::vector<uint8_t> pixels;
  };
  const std::vector<Image> images = {{28, 28, 1, augment_test_image(28, 28, 1, 3)},
                                     {32, 32, 3, augment_test_image(32, 32, 3, 4)}};
  struct Case {
    size_t image;
    std::string op;
    double magnitude;
    ImageOp row;
    bool resampled;
  };
  std::vector<Case> cases;
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& im = images[i];
    for (const AugmentOp op : kAllAugmentOps) {
      for (const AutoAugment policy : {AutoAugment::TrivialAugmentWide, AutoAugment::RandAugment})
        for (const int64_t bin : {0, 5, 9, 17, 30})
          for (const double sign : {1.0, -1.0}) {
            bool signed_op = false;
            const double m = sign * augment_magnitude(policy, op, bin, 31, im.h, im.w, &signed_op);
            if (sign < 0 && !signed_op) continue;
            cases.push_back(
                {i, augment_op_name(op), m, augment_op_row(op, m, im.h, im.w), resamples(op)});
          }
    }
    for (const double f : {0.0, 0.55, 1.45})
      cases.push_back({i, "adjust_brightness", f, factor_row(ImageOpKind::Brightness, f), false});
    for (const double f : {0.0, 0.55, 1.45})
      cases.push_back({i, "adjust_contrast", f, factor_row(ImageOpKind::Contrast, f), false});
    for (const double f : {0.4, 1.6})
      cases.push_back({i, "adjust_saturation", f, factor_row(ImageOpKind::Saturation, f), false});
    for (const double f : {-0.5, -0.1, 0.2, 0.45})
      cases.push_back({i, "adjust_hue", f, value_row(ImageOpKind::Hue, f), false});
  }
  nlohmann::json spec;
  for (const Image& im : images)
    spec["images"].push_back({{"h", im.h}, {"w", im.w}, {"c", im.c}, {"pixels", im.pixels}});
  for (const Case& c : cases)
    spec["cases"].push_back({{"image", c.image}, {"op", c.op}, {"magnitude", c.magnitude}});
  const std::string dir = hg::test::fresh_temp_dir("augment-ops");
  {
    std::ofstream f(dir + "/cases.json");
    f << spec.dump();
  }
  const std::string cmd =
      fmt::format("/usr/bin/python3 {}/tests/tools/torchvision_augment_ops.py {}/cases.json > {}",
                  HG_SOURCE_DIR, dir, dir + "/torchvision.json");
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << cmd << " failed (the test needs Debian's python3-torchvision: install-deps.sh --test)";
  const nlohmann::json ref = nlohmann::json::parse(hg::test::read_file(dir + "/torchvision.json"));
  ASSERT_EQ(ref.at("outputs").size(), cases.size());

  // All cases of an image as one batch, one row each.
  int64_t resampled_pixels = 0, resampled_differing = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& im = images[i];
    std::vector<uint8_t> batch;
    std::vector<float> rows;
    std::vector<size_t> which;
    for (size_t k = 0; k < cases.size(); ++k) {
      if (cases[k].image != i) continue;
      batch.insert(batch.end(), im.pixels.begin(), im.pixels.end());
      rows.insert(rows.end(), cases[k].row.begin(), cases[k].row.end());
      which.push_back(k);
    }
    const auto b = int64_t(which.size());
    const Tensor out = ops::augment_images(Tensor::from_vector(batch, {b, im.h, im.w, im.c}),
                                           Tensor::from_vector(rows, {b, 1, kImageOpWidth}));
    const std::vector<uint8_t> got = out.to_vector<uint8_t>();
    const int64_t n = im.h * im.w * im.c;
    for (int64_t j = 0; j < b; ++j) {
      const Case& c = cases[which[size_t(j)]];
      const auto want = ref.at("outputs").at(which[size_t(j)]).get<std::vector<int64_t>>();
      ASSERT_EQ(int64_t(want.size()), n);
      int64_t differing = 0;
      for (int64_t e = 0; e < n; ++e)
        differing += int64_t(got[size_t(j * n + e)]) != want[size_t(e)];
      if (c.resampled) {
        resampled_pixels += n;
        resampled_differing += differing;
        EXPECT_LE(differing, n / 100) << c.op << " " << c.magnitude << " on image " << i;
      } else {
        EXPECT_EQ(differing, 0) << c.op << " " << c.magnitude << " on image " << i;
      }
    }
  }
  RecordProperty("resampled_pixels_differing",
                 std::to_string(resampled_differing) + " of " + std::to_string(resampled_pixels));
  std::cout << "resampled pixels differing from torchvision: " << resampled_differing << " of "
            << resampled_pixels << "\n";

  // The magnitude tables.
  for (const int64_t size : {28, 32})
    for (const AutoAugment policy : {AutoAugment::TrivialAugmentWide, AutoAugment::RandAugment}) {
      const auto& space =
          ref.at("spaces").at(fmt::format("{}_{}", auto_augment_name(policy), size));
      for (const AugmentOp op : kAllAugmentOps) {
        const auto& entry = space.at(augment_op_name(op));
        const auto values = entry.at("values").get<std::vector<double>>();
        for (int64_t bin = 0; bin < int64_t(values.size()); ++bin) {
          bool signed_op = false;
          // Within an f32 ulp: torch's linspace rounds some bins either way by its vector width.
          const double want = values[size_t(bin)];
          EXPECT_NEAR(augment_magnitude(policy, op, bin, 31, size, size, &signed_op), want,
                      std::abs(want) * 0x1p-23)
              << augment_op_name(op) << " bin " << bin << " of " << auto_augment_name(policy);
          EXPECT_EQ(signed_op, entry.at("signed").get<bool>()) << augment_op_name(op);
        }
      }
    }
}

// The policies' draws: TrivialAugmentWide picks each of the 14 ops, each bin and each sign
// uniformly (counts within 15% of their expectation over 28,000 samples); RandAugment applies
// rand_ops ops at its one bin; ColorJitter's factors lie in their ranges and each op comes
// first a quarter of the time. Draws are a pure function of (seed, epoch, sample) and leave
// the crops and flips of the seed as they were.
TEST(ImageAugment, PoliciesDrawTheirDistributions) {
  constexpr int64_t kSamples = 28000;
  TransformOptions o{.crop_padding = 2, .flip = true};
  o.auto_augment.policy = AutoAugment::TrivialAugmentWide;
  const ImageTransform plain({.crop_padding = 2, .flip = true}, 28, 28, 1);
  const ImageTransform wide(o, 28, 28, 1);
  EXPECT_EQ(wide.program_rows(), 1);
  std::map<std::string, int64_t> kinds;
  std::map<float, int64_t> brightness;
  int64_t none = 0;
  for (int64_t s = 0; s < kSamples; ++s) {
    const Augmentation a = wide.draw(9, 2, s), p = plain.draw(9, 2, s);
    ASSERT_EQ(a.shift_y, p.shift_y);
    ASSERT_EQ(a.shift_x, p.shift_x);
    ASSERT_EQ(a.flip, p.flip);
    ASSERT_LE(a.op_count, 1);
    if (a.op_count == 0) {
      ++none;
      continue;
    }
    const ImageOp& r = a.ops[0];
    ++kinds[fmt::format("{}", r[0])];
    if (ImageOpKind(int32_t(r[0])) == ImageOpKind::Brightness) ++brightness[r[1]];
    const Augmentation again = wide.draw(9, 2, s);
    ASSERT_EQ(again.ops[0], r);
  }
  // Identity draws no row; the affine kind holds 5 of the 14 ops.
  const double per_op = double(kSamples) / kAugmentOps;
  EXPECT_NEAR(double(none), per_op, 0.15 * per_op);
  EXPECT_NEAR(double(kinds["1"]), 5 * per_op, 0.15 * 5 * per_op);
  for (const char* k : {"2", "3", "4", "5", "6", "7", "8", "9"})
    EXPECT_NEAR(double(kinds[k]), per_op, 0.15 * per_op) << "kind " << k;
  // 31 bins, two signs (bin 0 is 1 + 0 either way): 61 factors of 1 + [-0.99, 0.99].
  EXPECT_EQ(brightness.size(), 61u);
  for (const auto& [f, count] : brightness) {
    EXPECT_GE(f, 0.0f);
    EXPECT_LE(f, 1.99f);
    EXPECT_NEAR(double(count), per_op / 62 * (f == 1.0f ? 2 : 1), 0.6 * per_op / 62) << f;
  }

  TransformOptions r;
  r.auto_augment = {.policy = AutoAugment::RandAugment, .rand_ops = 3, .rand_magnitude = 9};
  r.color_jitter = {.brightness = 0.4, .contrast = 0.3, .saturation = 0.2, .hue = 0.1};
  const ImageTransform rand(r, 32, 32, 3);
  EXPECT_EQ(rand.program_rows(), 7);
  int64_t first[11] = {};
  for (int64_t s = 0; s < 8000; ++s) {
    const Augmentation a = rand.draw(1, 0, s);
    ASSERT_GE(a.op_count, 4);
    ASSERT_LE(a.op_count, 7);
    // The jitter's four rows come last, each kind once.
    std::set<int32_t> jitter;
    for (int64_t k = a.op_count - 4; k < a.op_count; ++k) {
      const ImageOp& row = a.ops[size_t(k)];
      const auto kind = ImageOpKind(int32_t(row[0]));
      jitter.insert(int32_t(kind));
      if (kind == ImageOpKind::Hue) {
        EXPECT_TRUE(row[1] >= -0.1f && row[1] <= 0.1f) << row[1];
      } else {
        const double x = kind == ImageOpKind::Brightness ? 0.4
                         : kind == ImageOpKind::Contrast ? 0.3
                                                         : 0.2;
        EXPECT_TRUE(row[1] >= float(1 - x) && row[1] <= float(1 + x)) << row[1];
      }
    }
    ASSERT_EQ(jitter, (std::set<int32_t>{2, 3, 4, 10}));
    ++first[int32_t(a.ops[size_t(a.op_count - 4)][0])];
    // RandAugment's rows are of bin 9: a rotation turns by +-(30 * 9 / 30) = +-9 degrees.
    for (int64_t k = 0; k < a.op_count - 4; ++k) {
      const ImageOp& row = a.ops[size_t(k)];
      if (ImageOpKind(int32_t(row[0])) == ImageOpKind::Brightness)
        EXPECT_TRUE(row[1] == float(1.0 + 0.27) || row[1] == float(1.0 - 0.27)) << row[1];
    }
  }
  for (const int32_t kind : {2, 3, 4, 10}) EXPECT_NEAR(double(first[kind]), 2000.0, 300.0);
}

// The host path applies the crop and flip, then the program, then the normalisation and the
// erased rectangle: apply() equals those steps done by hand through ops::augment_images.
TEST(ImageAugment, ApplyRunsTheProgramBetweenTheCropAndTheErasing) {
  TransformOptions o = default_transform("cifar10");
  o.random_erasing = 0.5;
  o.auto_augment.policy = AutoAugment::TrivialAugmentWide;
  o.color_jitter = {.brightness = 0.3, .contrast = 0.3, .saturation = 0.3, .hue = 0.05};
  const ImageTransform t(o, 32, 32, 3);
  const std::vector<uint8_t> img = augment_test_image(32, 32, 3, 11);
  int64_t with_program = 0;
  for (int64_t s = 0; s < 40; ++s) {
    const Augmentation a = t.draw(4, 1, s);
    with_program += a.op_count > 0;
    std::vector<float> got(size_t(32 * 32 * 3));
    t.apply(img.data(), a, got.data());
    // By hand: crop and flip alone, the program, then the table and the box.
    Augmentation crop = a;
    crop.op_count = 0;
    crop.erase_y0 = crop.erase_y1 = crop.erase_x0 = crop.erase_x1 = 0;
    std::vector<uint8_t> cropped(img.size());
    t.apply(img.data(), crop, cropped.data());
    std::vector<float> rows;
    for (int64_t k = 0; k < a.op_count; ++k)
      rows.insert(rows.end(), a.ops[size_t(k)].begin(), a.ops[size_t(k)].end());
    std::vector<uint8_t> augmented = cropped;
    if (a.op_count > 0)
      augmented = ops::augment_images(Tensor::from_vector(cropped, {1, 32, 32, 3}),
                                      Tensor::from_vector(rows, {1, a.op_count, kImageOpWidth}))
                      .to_vector<uint8_t>();
    Augmentation box{};
    box.erase_y0 = a.erase_y0, box.erase_y1 = a.erase_y1;
    box.erase_x0 = a.erase_x0, box.erase_x1 = a.erase_x1;
    std::vector<float> want(got.size());
    t.apply(augmented.data(), box, want.data());
    ASSERT_EQ(got, want) << "sample " << s;
  }
  EXPECT_GE(with_program, 40);  // the jitter's rows are always there
}

TEST(ImageAugment, BadOptionsAreRefusedNamingTheKey) {
  auto make = [](const TransformOptions& o, int64_t c = 1) { ImageTransform(o, 28, 28, c); };
  TransformOptions o;
  o.auto_augment = {.policy = AutoAugment::RandAugment, .rand_ops = 5};
  EXPECT_TRUE(fails_with([&] { make(o); }, {"data.rand_augment_ops = 5"}));
  o.auto_augment = {.policy = AutoAugment::RandAugment, .rand_magnitude = 31};
  EXPECT_TRUE(fails_with([&] { make(o); }, {"data.rand_augment_magnitude = 31"}));
  o.auto_augment = {.policy = AutoAugment::TrivialAugmentWide, .bins = 1};
  EXPECT_TRUE(fails_with([&] { make(o); }, {"data.augment_bins = 1"}));
  o.auto_augment = {};
  o.color_jitter.hue = 0.6;
  EXPECT_TRUE(fails_with([&] { make(o); }, {"hue is 0.6"}));
  o.color_jitter = {.brightness = -1};
  EXPECT_TRUE(fails_with([&] { make(o); }, {"brightness is -1"}));
  o.color_jitter = {.contrast = 0.2};
  EXPECT_TRUE(fails_with([&] { make(o, 2); }, {"1 or 3 channels"}));
  EXPECT_FALSE(parse_auto_augment("autoaugment").has_value());
  EXPECT_EQ(parse_auto_augment("rand_augment"), AutoAugment::RandAugment);
  // The op refuses other channel counts and misshapen programs.
  EXPECT_TRUE(fails_with(
      [] {
        (void)ops::augment_images(Tensor::zeros({1, 4, 4, 2}, DType::U8),
                                  Tensor::zeros({1, 1, kImageOpWidth}));
      },
      {"1 or 3 channels"}));
  EXPECT_TRUE(fails_with(
      [] {
        (void)ops::augment_images(Tensor::zeros({2, 4, 4, 1}, DType::U8),
                                  Tensor::zeros({1, 1, kImageOpWidth}));
      },
      {"program must be [2,K,8]"}));
}

}  // namespace
}  // namespace hg::data
