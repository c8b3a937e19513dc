// Resizing and crop geometry for images of any size: the bilinear resize against a direct
// float64 implementation (boxes, windows, flips, up- and downscaling, odd shapes; f32 and
// rounded to uint8; from the whole image and from the region of it the resize reads), and the
// RandomResizedCrop boxes' bounds, fallback, determinism, variety and pinned values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "data/image_fixtures.h"
#include "hourglass/data/image_resize.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace hg::data {
namespace {

// Direct float64 bilinear resize (half-pixel centres, clamped to the box) of `box` to
// oh x ow, then the window, mirrored when `flip`. Written from the definition, not the code.
std::vector<double> reference_resize(const test::Bytes& src, int64_t w, int64_t c,
                                     const CropBox& box, int64_t oh, int64_t ow, const CropBox& win,
                                     bool flip) {
  auto sample_at = [&](int64_t y, int64_t x, int64_t ch) {
    double sy = (double(y) + 0.5) * double(box.height) / double(oh) - 0.5;
    double sx = (double(x) + 0.5) * double(box.width) / double(ow) - 0.5;
    sy = std::clamp(sy, 0.0, double(box.height - 1));
    sx = std::clamp(sx, 0.0, double(box.width - 1));
    const double fy = std::floor(sy), fx = std::floor(sx);
    const auto y0 = int64_t(fy), x0 = int64_t(fx);
    const int64_t y1 = std::min(y0 + 1, box.height - 1), x1 = std::min(x0 + 1, box.width - 1);
    auto px = [&](int64_t yy, int64_t xx) {
      return double(src[size_t(((box.top + yy) * w + box.left + xx) * c + ch)]);
    };
    const double ay = sy - fy, ax = sx - fx;
    return (1 - ay) * ((1 - ax) * px(y0, x0) + ax * px(y0, x1)) +
           ay * ((1 - ax) * px(y1, x0) + ax * px(y1, x1));
  };
  std::vector<double> out;
  for (int64_t y = 0; y < win.height; ++y) {
    for (int64_t x = 0; x < win.width; ++x) {
      const int64_t wx = flip ? win.width - 1 - x : x;
      for (int64_t ch = 0; ch < c; ++ch) out.push_back(sample_at(win.top + y, win.left + wx, ch));
    }
  }
  return out;
}

// f32 weights and sums over values up to 255: each result is within a few f32 ulps of 255
// (255 * 2^-24 * ~8 operations ~ 1.2e-4); 1e-3 leaves room and still catches any wrong tap.
constexpr double kTol = 1e-3;

// The rows and columns reference_resize reads: the extremes of its taps, found by brute force.
CropBox reference_footprint(const CropBox& box, int64_t oh, int64_t ow, const CropBox& win) {
  auto extent = [](int64_t begin, int64_t extent, int64_t out, int64_t first, int64_t n) {
    int64_t lo = begin + extent, hi = begin - 1;
    for (int64_t o = first; o < first + n; ++o) {
      const double s = std::clamp((double(o) + 0.5) * double(extent) / double(out) - 0.5, 0.0,
                                  double(extent - 1));
      const auto i0 = int64_t(std::floor(s));
      lo = std::min(lo, begin + i0);
      hi = std::max(hi, begin + std::min(i0 + 1, extent - 1));
    }
    return std::make_pair(lo, hi + 1 - lo);
  };
  const auto [top, height] = extent(box.top, box.height, oh, win.top, win.height);
  const auto [left, width] = extent(box.left, box.width, ow, win.left, win.width);
  return {top, left, height, width};
}

// The pixels of `region` of an image of width w, as their own buffer.
test::Bytes cut_out(const test::Bytes& src, int64_t w, int64_t c, const CropBox& region) {
  test::Bytes out;
  for (int64_t y = region.top; y < region.top + region.height; ++y)
    for (int64_t x = region.left; x < region.left + region.width; ++x)
      for (int64_t ch = 0; ch < c; ++ch) out.push_back(src[size_t((y * w + x) * c + ch)]);
  return out;
}

void check_resize(int64_t h, int64_t w, int64_t c, CropBox box, int64_t oh, int64_t ow, CropBox win,
                  bool flip) {
  const std::string what =
      fmt::format("{}x{}x{} -> {}x{}{}", h, w, c, oh, ow, flip ? " flipped" : "");
  const test::Bytes src = test::random_bytes(size_t(h * w * c), uint32_t(h * 131 + w * 7 + c));
  std::vector<float> out(size_t(win.height * win.width * c), -1.0f);
  resize_bilinear(ImageRegion{src.data(), 0, 0, h, w, c}, box, oh, ow, win, flip, out.data());
  const std::vector<double> ref = reference_resize(src, w, c, box, oh, ow, win, flip);
  ASSERT_EQ(out.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(std::isfinite(out[i]));
    ASSERT_NEAR(out[i], ref[i], kTol) << "element " << i << " of " << what;
  }
  // Rounded to uint8: the f32 value rounded, halves up; within half a level of the reference.
  std::vector<uint8_t> bytes(out.size(), 0);
  resize_bilinear(ImageRegion{src.data(), 0, 0, h, w, c}, box, oh, ow, win, flip, bytes.data());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(bytes[i], uint8_t(std::floor(out[i] + 0.5f))) << "element " << i << " of " << what;
    ASSERT_LE(std::abs(double(bytes[i]) - ref[i]), 0.5 + kTol) << "element " << i << " of " << what;
  }
  // The footprint is exactly what the reference reads, and the pixels of that region alone
  // give the same values bit for bit.
  const CropBox fp = resize_footprint(box, oh, ow, win);
  const CropBox want = reference_footprint(box, oh, ow, win);
  ASSERT_EQ(std::make_tuple(fp.top, fp.left, fp.height, fp.width),
            std::make_tuple(want.top, want.left, want.height, want.width))
      << what;
  const test::Bytes part = cut_out(src, w, c, fp);
  std::vector<float> from_part(out.size(), -1.0f);
  resize_bilinear(ImageRegion{part.data(), fp.top, fp.left, fp.height, fp.width, c}, box, oh, ow,
                  win, flip, from_part.data());
  ASSERT_EQ(from_part, out) << what;
}

TEST(ImageResize, MatchesFloat64Reference) {
  // (h, w, c, box, out h, out w, window, flip)
  check_resize(7, 9, 3, {0, 0, 7, 9}, 7, 9, {0, 0, 7, 9}, false);       // identity
  check_resize(7, 9, 3, {0, 0, 7, 9}, 16, 20, {0, 0, 16, 20}, false);   // upscale
  check_resize(31, 17, 3, {0, 0, 31, 17}, 5, 4, {0, 0, 5, 4}, false);   // downscale, non-square
  check_resize(20, 30, 3, {3, 5, 11, 13}, 8, 8, {0, 0, 8, 8}, true);    // box and flip
  check_resize(20, 30, 1, {3, 5, 11, 13}, 9, 7, {0, 0, 9, 7}, false);   // one channel
  check_resize(12, 18, 3, {0, 0, 12, 18}, 9, 13, {1, 2, 7, 9}, false);  // a window
  check_resize(12, 18, 3, {0, 0, 12, 18}, 9, 13, {1, 2, 7, 9}, true);
  check_resize(1, 1, 3, {0, 0, 1, 1}, 4, 5, {0, 0, 4, 5}, false);  // one pixel
  check_resize(5, 5, 4, {4, 4, 1, 1}, 3, 3, {0, 0, 3, 3}, false);  // a one-pixel box
  check_resize(9, 9, 3, {0, 0, 9, 9}, 1, 1, {0, 0, 1, 1}, false);  // to one pixel
  // Evaluation's shape: a 500x375 image resized to 341x256, its centre 224x224 window.
  check_resize(500, 375, 3, {0, 0, 500, 375}, 341, 256, {58, 16, 224, 224}, false);
  check_resize(37, 53, 3, {0, 0, 37, 53}, 29, 41, {3, 5, 20, 30}, true);
}

// Direct float64 antialiased resize of `box` to oh x ow (PIL's bilinear filter, from its
// definition: each output pixel the normalised average of every box pixel under the triangle
// 1 - |d| / max(1, scale), d the distance between centres in source pixels), then the window,
// mirrored when `flip`.
std::vector<double> reference_antialiased(const test::Bytes& src, int64_t w, int64_t c,
                                          const CropBox& box, int64_t oh, int64_t ow,
                                          const CropBox& win, bool flip) {
  auto weights = [](int64_t o, int64_t out, int64_t extent) {
    const double scale = double(extent) / double(out), support = std::max(scale, 1.0);
    const double centre = (double(o) + 0.5) * scale;
    std::vector<double> k(size_t(extent), 0.0);
    double total = 0;
    for (int64_t i = 0; i < extent; ++i) {
      const double d = std::abs(double(i) + 0.5 - centre) / support;
      k[size_t(i)] = d < 1 ? 1 - d : 0;
      total += k[size_t(i)];
    }
    for (double& v : k) v /= total;
    return k;
  };
  std::vector<double> out;
  for (int64_t y = 0; y < win.height; ++y) {
    const std::vector<double> ky = weights(win.top + y, oh, box.height);
    for (int64_t x = 0; x < win.width; ++x) {
      const std::vector<double> kx =
          weights(win.left + (flip ? win.width - 1 - x : x), ow, box.width);
      for (int64_t ch = 0; ch < c; ++ch) {
        double v = 0;
        for (int64_t i = 0; i < box.height; ++i) {
          if (ky[size_t(i)] == 0) continue;
          for (int64_t j = 0; j < box.width; ++j)
            if (kx[size_t(j)] != 0)
              v += ky[size_t(i)] * kx[size_t(j)] *
                   double(src[size_t(((box.top + i) * w + box.left + j) * c + ch)]);
        }
        out.push_back(v);
      }
    }
  }
  return out;
}

// The antialiased resize: against the float64 definition (f32), against PIL's own resize of the
// cropped box (uint8, python3-pil: within one level, PIL rounding to uint8 between its two
// passes), from the footprint alone bit for bit, and by window and flip as parts of the whole.
void check_antialiased(const test::Bytes& src, int64_t h, int64_t w, int64_t c, CropBox box,
                       int64_t oh, int64_t ow, int* off_by_one, int* compared) {
  const std::string what = fmt::format("{}x{}x{} box {},{} {}x{} -> {}x{}", h, w, c, box.top,
                                       box.left, box.height, box.width, oh, ow);
  const ImageRegion whole{src.data(), 0, 0, h, w, c};
  const CropBox all{0, 0, oh, ow};
  std::vector<float> out(size_t(oh * ow * c), -1.0f);
  resize_antialiased(whole, box, oh, ow, all, false, out.data());
  const std::vector<double> ref = reference_antialiased(src, w, c, box, oh, ow, all, false);
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], kTol) << "element " << i << " of " << what;
  std::vector<uint8_t> bytes(out.size(), 0);
  resize_antialiased(whole, box, oh, ow, all, false, bytes.data());
  const std::string dir = hg::test::fresh_temp_dir("pil_resize");
  test::write_file(dir + "/in.raw", src);
  const std::string cmd = fmt::format(
      "/usr/bin/python3 {}/tests/tools/pil_resize.py {}/in.raw {} {} {} {} {} {} {} {} "
      "{} {}/out.raw",
      HG_SOURCE_DIR, dir, h, w, c, box.top, box.left, box.height, box.width, oh, ow, dir);
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << cmd << " failed (the test needs Debian's python3-pil: install-deps.sh --test)";
  const std::string pil = hg::test::read_file(dir + "/out.raw");
  ASSERT_EQ(pil.size(), bytes.size()) << what;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int d = std::abs(int(bytes[i]) - int(uint8_t(pil[i])));
    ASSERT_LE(d, 1) << "element " << i << " of " << what << ": PIL " << int(uint8_t(pil[i]))
                    << ", hourglass " << int(bytes[i]) << " (f32 " << out[i] << ")";
    *off_by_one += d;
    ++*compared;
  }
  // A window, flipped, is that part of the whole mirrored; the footprint's pixels suffice.
  const CropBox win{oh / 4, ow / 3, oh - oh / 4 - oh / 5, ow - ow / 3};
  const CropBox fp = resize_footprint(box, oh, ow, win, true);
  const test::Bytes part = cut_out(src, w, c, fp);
  std::vector<float> part_out(size_t(win.height * win.width * c), -1.0f);
  resize_antialiased(ImageRegion{part.data(), fp.top, fp.left, fp.height, fp.width, c}, box, oh, ow,
                     win, true, part_out.data());
  for (int64_t y = 0; y < win.height; ++y)
    for (int64_t x = 0; x < win.width; ++x)
      for (int64_t ch = 0; ch < c; ++ch)
        ASSERT_EQ(part_out[size_t((y * win.width + x) * c + ch)],
                  out[size_t(((win.top + y) * ow + win.left + win.width - 1 - x) * c + ch)])
            << what << " window at " << y << "," << x;
}

TEST(ImageResize, AntialiasedMatchesPil) {
  int off_by_one = 0, compared = 0;
  // A smooth image and a noisy one (the worst case for aliasing and for rounding).
  auto smooth = [](int64_t h, int64_t w, int64_t c) {
    test::Bytes b;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t ch = 0; ch < c; ++ch)
          b.push_back(uint8_t(127.5 + 120 * std::sin(0.05 * double(y * (ch + 1)) + 0.031 * x)));
    return b;
  };
  struct Case {
    int64_t h, w, c;
    CropBox box;
    int64_t oh, ow;
  };
  for (const Case& k : std::initializer_list<Case>{
           {300, 200, 3, {0, 0, 300, 200}, 146, 97},  // evaluation's shrink (256 / 224 ~ 2x)
           {300, 200, 3, {0, 0, 300, 200}, 37, 29},   // 8x, non-integer factors
           {96, 120, 1, {10, 7, 60, 90}, 23, 31},     // a box, one channel
           {17, 13, 3, {0, 0, 17, 13}, 40, 31},       // enlarged: plain bilinear
           {64, 64, 3, {0, 0, 64, 64}, 64, 64}}) {    // identity
    check_antialiased(smooth(k.h, k.w, k.c), k.h, k.w, k.c, k.box, k.oh, k.ow, &off_by_one,
                      &compared);
    check_antialiased(test::random_bytes(size_t(k.h * k.w * k.c), uint32_t(k.h + k.oh)), k.h, k.w,
                      k.c, k.box, k.oh, k.ow, &off_by_one, &compared);
  }
  // Most values are PIL's exactly; the rest one level off (11.4% measured: PIL rounds to uint8
  // between its horizontal and vertical passes).
  EXPECT_LT(double(off_by_one) / compared, 0.15) << off_by_one << " of " << compared;
}

// Enlarging, the antialiased resize is the plain one (the filter's support is one pixel).
TEST(ImageResize, AntialiasedEnlargingIsBilinear) {
  const test::Bytes src = test::random_bytes(9 * 7 * 3, 5);
  const ImageRegion whole{src.data(), 0, 0, 9, 7, 3};
  std::vector<float> a(size_t(20 * 15 * 3)), b(a.size());
  resize_bilinear(whole, {0, 0, 9, 7}, 20, 15, {0, 0, 20, 15}, false, a.data());
  resize_antialiased(whole, {0, 0, 9, 7}, 20, 15, {0, 0, 20, 15}, false, b.data());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], kTol) << i;
}

TEST(ImageResize, IdentityIsExact) {
  const test::Bytes src = test::random_bytes(6 * 5 * 3, 1);
  std::vector<float> out(src.size());
  resize_bilinear(ImageRegion{src.data(), 0, 0, 6, 5, 3}, {0, 0, 6, 5}, 6, 5, {0, 0, 6, 5}, false,
                  out.data());
  for (size_t i = 0; i < src.size(); ++i) EXPECT_EQ(out[i], float(src[i]));
}

TEST(ImageResize, EvalGeometryFollowsTorchvision) {
  EXPECT_EQ(eval_resize_for(224), 256);
  EXPECT_EQ(eval_resize_for(32), 37);  // 36.57
  EXPECT_EQ(eval_resize_for(64), 73);  // 73.14
  // 500x375 (h x w): shorter side 375 -> 256, longer int(256 * 500 / 375) = 341.
  EvalGeometry g = eval_geometry(500, 375, 256, 224);
  EXPECT_EQ(g.resized_height, 341);
  EXPECT_EQ(g.resized_width, 256);
  EXPECT_EQ(g.window.top, 58);  // round(117 / 2) = 58 (halves to even)
  EXPECT_EQ(g.window.left, 16);
  EXPECT_EQ(g.window.height, 224);
  EXPECT_EQ(g.window.width, 224);
  g = eval_geometry(10, 10, 256, 224);
  EXPECT_EQ(g.resized_height, 256);
  EXPECT_EQ(g.window.top, 16);
}

TEST(ResizedCrop, BoxesStayInBounds) {
  const ResizedCropOptions o;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {224, 224}, {375, 500}, {500, 375}, {33, 700}, {700, 33}, {1, 1}, {2, 3}, {17, 19}};
  for (const auto& [h, w] : shapes) {
    for (int64_t i = 0; i < 300; ++i) {
      const CropBox b = draw_resized_crop(7, 0, i, h, w, o, true).box;
      ASSERT_GE(b.top, 0);
      ASSERT_GE(b.left, 0);
      ASSERT_GE(b.height, 1);
      ASSERT_GE(b.width, 1);
      ASSERT_LE(b.top + b.height, h) << h << "x" << w << " sample " << i;
      ASSERT_LE(b.left + b.width, w) << h << "x" << w << " sample " << i;
      if (h >= 100 && w >= 100) {
        // Large images: the first try almost always fits; the box's area fraction and
        // ratio are then the drawn ones up to rounding each side by half a pixel.
        const double area = double(b.height * b.width) / double(h * w);
        const double ratio = double(b.width) / double(b.height);
        const double slack = 1.0 / double(std::min(b.height, b.width));
        EXPECT_GE(area, 0.08 * (1 - 2 * slack) - 1e-9);
        EXPECT_LE(area, 1.0);
        EXPECT_GE(ratio, 0.75 * (1 - 2 * slack));
        EXPECT_LE(ratio, 4.0 / 3.0 * (1 + 2 * slack));
      }
    }
  }
}

TEST(ResizedCrop, FallsBackToTorchvisionsCentreCrop) {
  // 100 x 1: no box of ratio >= 3/4 and area >= 8 fits, so every try fails.
  int calls = 0;
  auto half = [&] {
    ++calls;
    return 0.5;
  };
  CropBox b = random_resized_crop(100, 1, {}, half);
  EXPECT_EQ(calls, 20);    // 10 tries, two draws each
  EXPECT_EQ(b.height, 1);  // round(1 / (3/4)) = 1
  EXPECT_EQ(b.width, 1);
  EXPECT_EQ(b.top, 49);
  EXPECT_EQ(b.left, 0);
  // Wide: width clamped to height * 4/3.
  b = fallback_center_crop(30, 400, {});
  EXPECT_EQ(b.height, 30);
  EXPECT_EQ(b.width, 40);
  EXPECT_EQ(b.left, 180);
  // Within the ratio range: the whole image.
  b = fallback_center_crop(30, 35, {});
  EXPECT_EQ(std::make_tuple(b.top, b.left, b.height, b.width), std::make_tuple(0, 0, 30, 35));
}

// The draws themselves, pinned: a training run's crops and flips for a (seed, epoch, sample)
// must not change with the code that decodes them (values recorded from draw_resized_crop).
TEST(ResizedCrop, DrawsArePinned) {
  const ResizedCropOptions o;
  auto key = [](const SizedAugmentation& a) {
    return std::make_tuple(a.box.top, a.box.left, a.box.height, a.box.width, a.flip);
  };
  EXPECT_EQ(key(draw_resized_crop(3, 1, 0, 375, 500, o, true)),
            std::make_tuple(89, 22, 264, 264, false));
  EXPECT_EQ(key(draw_resized_crop(3, 1, 7, 375, 500, o, true)),
            std::make_tuple(8, 139, 353, 356, true));
  EXPECT_EQ(key(draw_resized_crop(3, 2, 7, 375, 500, o, true)),
            std::make_tuple(0, 49, 366, 406, true));
  EXPECT_EQ(key(draw_resized_crop(11, 0, 123456, 500, 375, o, true)),
            std::make_tuple(21, 14, 270, 321, false));
  EXPECT_EQ(key(draw_resized_crop(1, 5, 42, 33, 700, o, true)),
            std::make_tuple(0, 328, 33, 44, false));
  EXPECT_EQ(key(draw_resized_crop(9, 3, 2, 224, 224, o, true)),
            std::make_tuple(50, 127, 83, 94, true));
}

TEST(ResizedCrop, PureFunctionOfSeedEpochAndSample) {
  const ResizedCropOptions o;
  auto key = [](const SizedAugmentation& a) {
    return std::make_tuple(a.box.top, a.box.left, a.box.height, a.box.width, a.flip);
  };
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>> distinct;
  int flips = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const SizedAugmentation a = draw_resized_crop(3, 1, i, 375, 500, o, true);
    EXPECT_EQ(key(a), key(draw_resized_crop(3, 1, i, 375, 500, o, true)));
    distinct.insert(key(a));
    flips += a.flip;
    // Flipping off changes the flip only.
    const SizedAugmentation no_flip = draw_resized_crop(3, 1, i, 375, 500, o, false);
    EXPECT_FALSE(no_flip.flip);
    EXPECT_EQ(key(no_flip), key(SizedAugmentation{a.box, false}));
  }
  EXPECT_GE(distinct.size(), 195u);  // different per index
  EXPECT_GT(flips, 70);
  EXPECT_LT(flips, 130);
  // Other epochs and seeds draw other boxes.
  EXPECT_NE(key(draw_resized_crop(3, 1, 5, 375, 500, o, true)),
            key(draw_resized_crop(3, 2, 5, 375, 500, o, true)));
  EXPECT_NE(key(draw_resized_crop(3, 1, 5, 375, 500, o, true)),
            key(draw_resized_crop(4, 1, 5, 375, 500, o, true)));
}

}  // namespace
}  // namespace hg::data
