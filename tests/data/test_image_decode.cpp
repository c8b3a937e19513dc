// Image decoding: JPEG and PNG (RGB, gray, palette, alpha) into RGB HWC, detection by content,
// and errors naming the path and the reason for corrupt, truncated, unknown and oversized input.
#include <gtest/gtest.h>

#include <cstdlib>

#include "data/image_fixtures.h"
#include "hourglass/data/image_decode.h"
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

// Sizes from the header alone, and a JPEG decoded at the smallest DCT scaling (k/8) that still
// covers the size asked for: a 48x64 image asked for 20x30 decodes at 4/8, 24x32, close to the
// source shrunk by averaging 2x2 blocks; asked for more than its size, at full size.
TEST(ImageDecode, JpegDecodesAtTheSmallestScalingThatCoversTheSizeAskedFor) {
  const Bytes px = test::pattern_pixels(48, 64, 3, 5);
  const Bytes jpeg = test::encode_jpeg(px, 48, 64);
  const ImageSize size = read_image_size(jpeg.data(), jpeg.size(), "a.jpg");
  EXPECT_EQ(size.height, 48);
  EXPECT_EQ(size.width, 64);
  const Bytes png = test::encode_png(px, 48, 64, PNG_FORMAT_RGB);
  EXPECT_EQ(read_image_size(png.data(), png.size(), "a.png").width, 64);
  const DecodedImage half = decode_image(jpeg.data(), jpeg.size(), "a.jpg", 20, 30);
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
  const DecodedImage seven = decode_image(jpeg.data(), jpeg.size(), "a.jpg", 40, 50);
  EXPECT_EQ(seven.height, 42);  // 7/8: the first scaling at least 40x50
  EXPECT_EQ(seven.width, 56);
  const DecodedImage full = decode_image(jpeg.data(), jpeg.size(), "a.jpg", 100, 100);
  EXPECT_EQ(full.height, 48);
  EXPECT_EQ(full.width, 64);
  hg::test::expect_invalid([&] { read_image_size(png.data(), 20, "cut.png"); }, {"cut.png", "PNG"});
  hg::test::expect_invalid([&] { read_image_size(jpeg.data(), 2, "x.jpg"); },
                           {"x.jpg", "not a JPEG"});
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

}  // namespace
}  // namespace hg::data
