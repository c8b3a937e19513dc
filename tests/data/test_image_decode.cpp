// Image decoding: JPEG and PNG (RGB, gray, palette, alpha) into RGB HWC, detection by content,
// JPEGs at DCT scalings and in part (a region: the pixels of a full decode, compared with
// TurboJPEG's decoder and with the full decode on awkward sizes, subsamplings, gray and CMYK),
// and errors naming the path and the reason for corrupt, truncated, unknown and oversized input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <tuple>

#include "data/image_fixtures.h"
#include "hourglass/data/image_decode.h"
#include "hourglass/data/image_input.h"
#include "support/expect_error.h"

namespace hg::data {
namespace {

using test::Bytes;
using test::fails_with;

DecodedImage decode(const Bytes& b, const std::string& path = "mem.img") {
  return decode_image(b.data(), b.size(), path);
}

// Largest absolute difference between two byte arrays of one size.
int max_diff(const Bytes& a, const Bytes& b) {
  EXPECT_EQ(a.size(), b.size());
  int worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(int(a[i]) - int(b[i])));
  return worst;
}

TEST(ImageDecode, DetectsFormatByContent) {
  const Bytes jpg = test::jpeg_of(4, 4, 1), png = test::png_of(4, 4, 1);
  EXPECT_EQ(detect_image_format(jpg.data(), jpg.size()), ImageFormat::Jpeg);
  EXPECT_EQ(detect_image_format(png.data(), png.size()), ImageFormat::Png);
  EXPECT_EQ(detect_image_format(jpg.data(), 2), ImageFormat::Unknown);
  const Bytes junk = test::random_bytes(64, 3);
  EXPECT_EQ(detect_image_format(junk.data(), junk.size()), ImageFormat::Unknown);
}

TEST(ImageDecode, PngRoundTripsExactly) {
  const Bytes px = test::pattern_pixels(5, 7, 3, 2);
  const DecodedImage img = decode(test::encode_png(px, 5, 7));
  EXPECT_EQ(img.height, 5);
  EXPECT_EQ(img.width, 7);
  EXPECT_EQ(img.pixels, px);
}

TEST(ImageDecode, PngGrayAndPaletteAndAlphaBecomeRgb) {
  const Bytes gray = test::pattern_pixels(3, 4, 1, 5);
  DecodedImage img = decode(test::encode_png(gray, 3, 4, PNG_FORMAT_GRAY));
  ASSERT_EQ(img.pixels.size(), 3u * 4 * 3);
  for (size_t i = 0; i < gray.size(); ++i) {
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(img.pixels[i * 3 + c], gray[i]) << i;
  }
  // Opaque alpha: the colours come through unchanged.
  Bytes rgba = test::pattern_pixels(3, 4, 4, 6);
  for (size_t i = 3; i < rgba.size(); i += 4) rgba[i] = 255;
  img = decode(test::encode_png(rgba, 3, 4, PNG_FORMAT_RGBA));
  for (size_t i = 0; i < 12; ++i) {
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(img.pixels[i * 3 + c], rgba[i * 4 + c]) << i;
  }
  // Fully transparent pixels are composited over black.
  for (size_t i = 3; i < rgba.size(); i += 4) rgba[i] = 0;
  img = decode(test::encode_png(rgba, 3, 4, PNG_FORMAT_RGBA));
  for (uint8_t v : img.pixels) EXPECT_EQ(v, 0);
  // A palette image (libpng's colour-mapped write).
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = 2;
  image.height = 1;
  image.format = PNG_FORMAT_RGB_COLORMAP;
  image.colormap_entries = 2;
  const uint8_t colormap[6] = {10, 20, 30, 200, 100, 50};
  const uint8_t indices[2] = {1, 0};
  png_alloc_size_t size = 0;
  ASSERT_NE(png_image_write_get_memory_size(image, size, 0, indices, 0, colormap), 0);
  Bytes pal(size);
  ASSERT_NE(png_image_write_to_memory(&image, pal.data(), &size, 0, indices, 0, colormap), 0);
  pal.resize(size);
  img = decode(pal);
  EXPECT_EQ(img.pixels, (Bytes{200, 100, 50, 10, 20, 30}));
}

TEST(ImageDecode, JpegDecodesCloseToItsSource) {
  const Bytes px = test::pattern_pixels(16, 24, 3, 4);
  const DecodedImage img = decode(test::encode_jpeg(px, 16, 24));
  EXPECT_EQ(img.height, 16);
  EXPECT_EQ(img.width, 24);
  // Quality 95, 4:4:4 on a smooth pattern: a few levels off at most (9 measured).
  EXPECT_LE(max_diff(img.pixels, px), 12);
}

// Sizes from the header alone, and a JPEG decoded at the smallest DCT scaling of 1/8, 2/8, 4/8
// and 8/8 that still covers the size asked for: a 48x64 image asked for 20x30 decodes at 4/8,
// 24x32, close to the source shrunk by averaging 2x2 blocks; asked for 40x50 (which 7/8 would
// cover: a scaling not used) and for more than its size, at full size; asked for 10x10, at 2/8.
TEST(ImageDecode, JpegDecodesAtTheSmallestScalingThatCoversTheSizeAskedFor) {
  const Bytes px = test::pattern_pixels(48, 64, 3, 5);
  const Bytes jpeg = test::encode_jpeg(px, 48, 64);
  const ImageHeader size = read_image_header(jpeg.data(), jpeg.size(), "a.jpg");
  EXPECT_EQ(size.format, ImageFormat::Jpeg);
  EXPECT_EQ(size.height, 48);
  EXPECT_EQ(size.width, 64);
  const Bytes png = test::encode_png(px, 48, 64, PNG_FORMAT_RGB);
  EXPECT_EQ(read_image_header(png.data(), png.size(), "a.png").width, 64);
  EXPECT_EQ(read_image_header(png.data(), png.size(), "a.png").format, ImageFormat::Png);
  const DecodedImage half = decode_image(jpeg.data(), jpeg.size(), "a.jpg", {20, 30});
  ASSERT_EQ(half.height, 24);
  ASSERT_EQ(half.width, 32);
  Bytes shrunk;
  for (int y = 0; y < 24; ++y)
    for (int x = 0; x < 32; ++x)
      for (int c = 0; c < 3; ++c) {
        int sum = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx)
            sum += px[size_t(((2 * y + dy) * 64 + 2 * x + dx) * 3 + c)];
        shrunk.push_back(uint8_t((sum + 2) / 4));
      }
  EXPECT_LE(max_diff(half.pixels, shrunk), 16);
  EXPECT_EQ(half.image_height, 24);
  EXPECT_EQ(half.top, 0);
  const DecodedImage seven = decode_image(jpeg.data(), jpeg.size(), "a.jpg", {40, 50});
  EXPECT_EQ(seven.height, 48);
  EXPECT_EQ(seven.width, 64);
  const DecodedImage full = decode_image(jpeg.data(), jpeg.size(), "a.jpg", {100, 100});
  EXPECT_EQ(full.height, 48);
  EXPECT_EQ(full.width, 64);
  const DecodedImage quarter = decode_image(jpeg.data(), jpeg.size(), "a.jpg", {10, 10});
  EXPECT_EQ(quarter.height, 12);
  EXPECT_EQ(quarter.width, 16);
  // decoded_size says the same without decoding; PNGs decode at full size.
  const ImageSize at7 = decoded_size(size, 40, 50), at8 = decoded_size(size, 100, 100);
  EXPECT_EQ(at7.height, 48);
  EXPECT_EQ(at7.width, 64);
  EXPECT_EQ(decoded_size(size, 20, 30).height, 24);
  EXPECT_EQ(decoded_size(size, 10, 10).width, 16);
  EXPECT_EQ(decoded_size(size, 1, 1).width, 8);
  EXPECT_EQ(at8.height, 48);
  EXPECT_EQ(decoded_size(read_image_header(png.data(), png.size(), "a.png"), 20, 30).width, 64);
  hg::test::expect_invalid([&] { read_image_header(png.data(), 20, "cut.png"); },
                           {"cut.png", "PNG"});
  hg::test::expect_invalid([&] { read_image_header(jpeg.data(), 2, "x.jpg"); },
                           {"x.jpg", "not a JPEG"});
}

// The JPEGs of the region tests: (height, width, channels, TurboJPEG subsampling). Sizes not a
// multiple of the 8 or 16 pixel blocks, one-block-wide strips, 4:4:4, 4:2:2, 4:2:0, 4:4:0,
// 4:1:1, gray, CMYK (YCCK) and progressive.
struct JpegCase {
  int h, w, channels, subsampling;
  const char* name;
  int flags = 0;
};
const JpegCase kJpegCases[] = {
    {37, 53, 3, TJSAMP_444, "37x53 4:4:4"},
    {45, 61, 3, TJSAMP_420, "45x61 4:2:0"},
    {50, 33, 3, TJSAMP_422, "50x33 4:2:2"},
    {29, 70, 3, TJSAMP_440, "29x70 4:4:0"},
    {23, 67, 3, TJSAMP_411, "23x67 4:1:1"},
    {41, 39, 1, TJSAMP_GRAY, "41x39 gray"},
    {33, 47, 4, TJSAMP_420, "33x47 CMYK"},
    {16, 16, 3, TJSAMP_420, "16x16 4:2:0"},
    {9, 120, 3, TJSAMP_420, "9x120 4:2:0"},
    {120, 9, 3, TJSAMP_420, "120x9 4:2:0"},
    {375, 500, 3, TJSAMP_420, "375x500 4:2:0"},
    {45, 61, 3, TJSAMP_420, "45x61 4:2:0 progressive", TJFLAG_PROGRESSIVE},
    {37, 53, 3, TJSAMP_444, "37x53 4:4:4 progressive", TJFLAG_PROGRESSIVE},
};

Bytes jpeg_for(const JpegCase& c) {
  return test::encode_jpeg(test::noisy_pixels(c.h, c.w, c.channels, c.h + c.w), c.h, c.w,
                           c.channels, c.subsampling, c.flags);
}

// The scalings decode_image picks from (k/8).
constexpr int kScalings[] = {1, 2, 4, 8};

// The minimum sizes that make decode_image pick scaling k/8 of an h x w image.
DecodeRequest at_scaling(int h, int w, int k) {
  return {(int64_t(h) * k + 7) / 8, (int64_t(w) * k + 7) / 8, {}};
}

// TurboJPEG's decoder (the one this code used before) at scaling k/8, as RGB; CMYK as the
// documentation of image_decode.h converts it (R = C * K / 255, rounded).
Bytes turbojpeg_decode(const Bytes& jpeg, int k, int& h, int& w) {
  tjhandle tj = tjInitDecompress();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  EXPECT_EQ(
      tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), &width, &height, &subsampling, &colorspace),
      0);
  const tjscalingfactor f{k, 8};
  w = TJSCALED(width, f);
  h = TJSCALED(height, f);
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  Bytes px(size_t(h) * size_t(w) * (cmyk ? 4 : 3));
  EXPECT_EQ(tjDecompress2(tj, jpeg.data(), jpeg.size(), px.data(), w, 0, h,
                          cmyk ? TJPF_CMYK : TJPF_RGB, 0),
            0)
      << tjGetErrorStr2(tj);
  tjDestroy(tj);
  if (!cmyk) return px;
  Bytes rgb(size_t(h) * size_t(w) * 3);
  for (size_t i = 0; i < size_t(h) * size_t(w); ++i)
    for (size_t c = 0; c < 3; ++c)
      rgb[i * 3 + c] = uint8_t((px[i * 4 + c] * px[i * 4 + 3] + 127) / 255);
  return rgb;
}

TEST(ImageDecode, JpegFullDecodeIsTurboJpegs) {
  for (const JpegCase& c : kJpegCases) {
    const Bytes jpeg = jpeg_for(c);
    for (const int k : kScalings) {
      int h = 0, w = 0;
      const Bytes want = turbojpeg_decode(jpeg, k, h, w);
      const DecodedImage got =
          decode_image(jpeg.data(), jpeg.size(), c.name, at_scaling(c.h, c.w, k));
      ASSERT_EQ(got.height, h) << c.name << " at " << k << "/8";
      ASSERT_EQ(got.width, w) << c.name << " at " << k << "/8";
      EXPECT_EQ(got.image_height, h);
      EXPECT_EQ(got.image_width, w);
      ASSERT_EQ(got.pixels, want) << c.name << " at " << k << "/8";
    }
  }
}

// A region decoded in part holds the full decode's pixels at the same coordinates, exactly, at
// every scaling: regions at each edge and corner, one pixel, one row, one column (the first ones
// too), and random ones. (libjpeg's fancy upsampling would make a region's outermost columns
// differ, and a partial row of one 4:2:0 chroma sample at the left edge: the decoder widens the
// columns it decodes by a pixel each side, and to at least four, so that the region asked for
// never holds them.)
TEST(ImageDecode, JpegRegionIsTheFullDecodesPixels) {
  uint32_t draws = 1;
  auto draw = [&](int64_t n) {  // uniform in [0, n)
    draws = draws * 1664525u + 1013904223u;
    return int64_t((draws >> 8) % uint32_t(n));
  };
  for (const JpegCase& c : kJpegCases) {
    const Bytes jpeg = jpeg_for(c);
    for (const int k : kScalings) {
      const DecodeRequest scaling = at_scaling(c.h, c.w, k);
      const DecodedImage full = decode_image(jpeg.data(), jpeg.size(), c.name, scaling);
      const int64_t h = full.height, w = full.width;
      std::vector<CropBox> regions = {{0, 0, h, w},
                                      {0, 0, 1, 1},
                                      {h - 1, w - 1, 1, 1},
                                      {0, w - 1, h, 1},
                                      {h - 1, 0, 1, w},
                                      {h / 2, w / 2, (h + 1) / 2, (w + 1) / 2},
                                      {0, 0, h / 2 + 1, w},
                                      {0, 0, h, 1},
                                      {h / 3, 1, std::max<int64_t>(h / 2, 1), 1},
                                      {h - 1, 0, 1, std::min<int64_t>(w, 2)}};
      for (int i = 0; i < 24; ++i) {
        const int64_t top = draw(h), left = draw(w);
        regions.push_back({top, left, 1 + draw(h - top), 1 + draw(w - left)});
      }
      for (const CropBox& r : regions) {
        DecodeRequest request = scaling;
        request.region = r;
        const DecodedImage part = decode_image(jpeg.data(), jpeg.size(), c.name, request);
        const std::string what = fmt::format("{} at {}/8, region {},{} {}x{}", c.name, k, r.top,
                                             r.left, r.height, r.width);
        ASSERT_EQ(part.image_height, h) << what;
        ASSERT_EQ(part.image_width, w) << what;
        // It holds the region (and may hold more: the columns go to libjpeg's block edges).
        ASSERT_LE(part.top, r.top) << what;
        ASSERT_LE(part.left, r.left) << what;
        ASSERT_GE(part.top + part.height, r.top + r.height) << what;
        ASSERT_GE(part.left + part.width, r.left + r.width) << what;
        ASSERT_LE(part.top + part.height, h) << what;
        ASSERT_LE(part.left + part.width, w) << what;
        ASSERT_EQ(part.pixels.size(), size_t(part.height * part.width * 3)) << what;
        for (int64_t y = r.top; y < r.top + r.height; ++y)
          for (int64_t x = r.left; x < r.left + r.width; ++x)
            for (int64_t ch = 0; ch < 3; ++ch) {
              const uint8_t want = full.pixels[size_t((y * w + x) * 3 + ch)];
              const uint8_t got =
                  part.pixels[size_t(((y - part.top) * part.width + x - part.left) * 3 + ch)];
              ASSERT_EQ(got, want) << what << ": pixel " << y << "," << x << " channel " << ch;
            }
      }
    }
  }
}

// Decoding a region stops below it, so the end of the file is not read; a cut-short file must
// still fail, whatever the region (here rows far above the cut).
TEST(ImageDecode, JpegRegionOfACutShortFileFails) {
  const Bytes jpg = test::jpeg_of(128, 128, 1);
  const Bytes cut = test::truncated(jpg, jpg.size() * 3 / 4);
  DecodeRequest request;
  request.region = {0, 0, 8, 8};
  EXPECT_TRUE(fails_with([&] { decode_image(cut.data(), cut.size(), "cut.jpg", request); },
                         {"cut.jpg", "corrupt JPEG data", "Premature end"}));
  // Cut before its last two bytes (the end-of-image marker), and a progressive file cut short.
  const Bytes no_end = test::truncated(jpg, jpg.size() - 2);
  EXPECT_TRUE(fails_with([&] { decode_image(no_end.data(), no_end.size(), "end.jpg", request); },
                         {"end.jpg", "corrupt JPEG data", "Premature end"}));
  const Bytes progressive = test::encode_jpeg(test::pattern_pixels(64, 64, 3, 2), 64, 64, 3,
                                              TJSAMP_420, TJFLAG_PROGRESSIVE);
  const Bytes cut_progressive = test::truncated(progressive, progressive.size() * 3 / 4);
  EXPECT_TRUE(fails_with(
      [&] { decode_image(cut_progressive.data(), cut_progressive.size(), "p.jpg", request); },
      {"p.jpg", "corrupt JPEG data", "Premature end"}));
  // The whole file, region or not, decodes.
  EXPECT_EQ(decode_image(jpg.data(), jpg.size(), "a.jpg", request).height, 8);
  // A PNG ignores the region: decoded whole.
  const Bytes png = test::png_of(12, 10, 2);
  const DecodedImage whole = decode_image(png.data(), png.size(), "a.png", request);
  EXPECT_EQ(whole.height, 12);
  EXPECT_EQ(whole.width, 10);
}

TEST(ImageDecode, GrayJpegBecomesRgb) {
  const Bytes gray = test::pattern_pixels(8, 8, 1, 7);
  const DecodedImage img = decode(test::encode_jpeg(gray, 8, 8, 1));
  ASSERT_EQ(img.pixels.size(), 8u * 8 * 3);
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(img.pixels[i * 3], img.pixels[i * 3 + 1]);
    EXPECT_EQ(img.pixels[i * 3], img.pixels[i * 3 + 2]);
    EXPECT_LE(std::abs(int(img.pixels[i * 3]) - int(gray[i])), 6);
  }
}

TEST(ImageDecode, CorruptInputNamesPathAndReason) {
  const Bytes jpg = test::jpeg_of(128, 128, 1);
  EXPECT_TRUE(fails_with([&] { decode(test::truncated(jpg, jpg.size() * 3 / 4), "cut.jpg"); },
                         {"cut.jpg", "corrupt JPEG data", "Premature end"}));
  EXPECT_TRUE(
      fails_with([&] { decode(test::truncated(jpg, 40), "head.jpg"); }, {"head.jpg", "JPEG"}));
  EXPECT_TRUE(fails_with([&] { decode(test::png_with_bad_crc(test::png_of(8, 8, 1)), "crc.png"); },
                         {"crc.png", "corrupt PNG", "CRC"}));
  const Bytes png = test::png_of(8, 8, 1);
  EXPECT_TRUE(fails_with([&] { decode(test::truncated(png, png.size() - 20), "cut.png"); },
                         {"cut.png", "corrupt PNG"}));
  EXPECT_TRUE(fails_with([&] { decode(test::random_bytes(500, 9), "noise.jpg"); },
                         {"noise.jpg", "not a JPEG or PNG image", "500 bytes"}));
  EXPECT_TRUE(fails_with([&] { decode(Bytes{}, "empty.png"); }, {"empty.png", "0 bytes"}));
}

TEST(ImageDecode, RefusesOversizedImagesFromTheHeader) {
  // A PNG header claiming 20000 x 1 pixels: refused before any pixel buffer is allocated.
  const Bytes wide = test::encode_png(Bytes(20000 * 3, 7), 1, 20000);
  EXPECT_TRUE(fails_with([&] { decode(wide, "wide.png"); }, {"wide.png", "20000x1", "16384"}));
  // JPEG: patch the SOF0 frame's height and width to 16000 x 16000 (2.56e8 pixels < 2^28
  // pass; 17000 a side fails the side limit).
  Bytes jpg = test::jpeg_of(8, 8, 1);
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
      jpg[i + 5] = uint8_t(17000 >> 8);
      jpg[i + 6] = uint8_t(17000 & 255);
      break;
    }
  }
  EXPECT_TRUE(
      fails_with([&] { decode(jpg, "tall.jpg"); }, {"tall.jpg", "8x17000", "outside the limits"}));
}

TEST(ImageDecode, ReadsFilesAndNamesMissingOnes) {
  test::ScratchDir dir;
  const Bytes px = test::pattern_pixels(3, 3, 3, 1);
  // A PNG named .jpg: the content decides.
  test::write_file(dir.file("really_png.jpg"), test::encode_png(px, 3, 3));
  EXPECT_EQ(read_image(dir.file("really_png.jpg")).pixels, px);
  EXPECT_TRUE(fails_with([&] { read_image(dir.file("absent.png")); }, {"absent.png", "not found"}));
  EXPECT_TRUE(fails_with([&] { read_image(dir.path()); }, {dir.path(), "directory"}));
}

// A decoded image as a model's input (hourglass predict): as it is at the model's size, in luma
// for one channel, resized otherwise, and normalised.
TEST(ImageAsModelInput, SizeChannelsAndNormalisation) {
  TransformOptions norm;
  norm.mean = {0.5f};
  norm.std = {0.25f};
  DecodedImage img;
  img.height = img.image_height = 2;
  img.width = img.image_width = 2;
  img.pixels = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
  const std::vector<float> rgb = image_as_model_input(img, ImageTransform(norm, 2, 2, 3));
  ASSERT_EQ(rgb.size(), 12u);
  for (size_t i = 0; i < 12; ++i)
    EXPECT_FLOAT_EQ(rgb[i], (float(img.pixels[i]) / 255.0f - 0.5f) / 0.25f) << i;
  // PIL's "L": (19595 R + 38470 G + 7471 B + 2^15) >> 16.
  const std::vector<float> luma = image_as_model_input(img, ImageTransform(norm, 2, 2, 1));
  const int expected[] = {76, 150, 29, (19595 * 10 + 38470 * 20 + 7471 * 30 + 32768) >> 16};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(luma[i], (float(expected[i]) / 255.0f - 0.5f) / 0.25f) << i;
  // A uniform image of another size and shape stays uniform through the resize and crop.
  DecodedImage big;
  big.height = big.image_height = 30;
  big.width = big.image_width = 40;
  big.pixels.assign(30 * 40 * 3, 0);
  for (size_t i = 0; i < big.pixels.size(); i += 3) big.pixels[i] = 200, big.pixels[i + 2] = 51;
  const std::vector<float> small = image_as_model_input(big, ImageTransform(norm, 8, 8, 3));
  ASSERT_EQ(small.size(), 8u * 8 * 3);
  for (size_t i = 0; i < small.size(); i += 3) {
    EXPECT_FLOAT_EQ(small[i], (200.0f / 255.0f - 0.5f) / 0.25f);
    EXPECT_FLOAT_EQ(small[i + 1], -2.0f);
    EXPECT_FLOAT_EQ(small[i + 2], (51.0f / 255.0f - 0.5f) / 0.25f);
  }
  EXPECT_THROW(image_as_model_input(img, ImageTransform(norm, 2, 2, 2)), Error);
}

}  // namespace
}  // namespace hg::data
