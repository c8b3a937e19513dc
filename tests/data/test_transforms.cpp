// Transforms: the flip mirrors exactly, the crop shifts and fills with zero pixels, cutout
// blanks its clipped square after both, the normalisation gives (p / 255 - mean) / std, and the
// random draws are a pure function of (seed, epoch, sample) with the intended distribution (the
// crops and flips the same with and without cutout).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "data/fixtures.h"
#include "hourglass/base/rng.h"
#include "hourglass/data/transforms.h"
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

}  // namespace
}  // namespace hg::data
