// Writers of the image fixtures the folder-dataset tests use: JPEG through TurboJPEG's
// encoder and PNG through libpng's simplified writer (the libraries the decoder uses, so
// nothing outside the build is needed), a smooth pattern that survives JPEG, and the corrupt
// variants (a cut-short JPEG, a PNG with a bad CRC, random bytes).
#pragma once

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/fixtures.h"

namespace hg::data::test {

// A smooth RGB (or gray, channels 1) pattern of h x w keyed by `seed`.
inline Bytes pattern_pixels(int h, int w, int channels, int seed) {
  Bytes px(size_t(h) * w * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        const double v = 128.0 + 100.0 * std::sin(0.3 * y + 0.2 * x + 1.1 * c + seed);
        px[(size_t(y) * w + x) * channels + c] = uint8_t(std::lround(v));
      }
    }
  }
  return px;
}

// JPEG of `pixels` (channels 3: RGB, 1: gray, 4: CMYK, written as YCCK) at quality 95, with
// TurboJPEG's chroma subsampling `subsampling` (TJSAMP_*; -1: 4:4:4, or gray for one channel)
// and flags (TJFLAG_PROGRESSIVE: a progressive JPEG).
inline Bytes encode_jpeg(const Bytes& pixels, int h, int w, int channels = 3, int subsampling = -1,
                         int flags = 0) {
  const int format = channels == 1 ? TJPF_GRAY : channels == 4 ? TJPF_CMYK : TJPF_RGB;
  if (subsampling < 0) subsampling = channels == 1 ? TJSAMP_GRAY : TJSAMP_444;
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(tj, pixels.data(), w, 0, h, format, &out, &size, subsampling, 95, flags);
  Bytes bytes;
  if (rc == 0) bytes.assign(out, out + size);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  tjFree(out);
  tjDestroy(tj);
  return bytes;
}

// PNG of `pixels` in libpng's format `format` (PNG_FORMAT_RGB, _GRAY, _RGBA, ...).
inline Bytes encode_png(const Bytes& pixels, int h, int w, uint32_t format = PNG_FORMAT_RGB) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = uint32_t(w);
  image.height = uint32_t(h);
  image.format = format;
  png_alloc_size_t size = 0;
  EXPECT_NE(png_image_write_get_memory_size(image, size, 0, pixels.data(), 0, nullptr), 0)
      << image.message;
  Bytes bytes(size);
  EXPECT_NE(png_image_write_to_memory(&image, bytes.data(), &size, 0, pixels.data(), 0, nullptr), 0)
      << image.message;
  bytes.resize(size);
  return bytes;
}

inline Bytes jpeg_of(int h, int w, int seed) {
  return encode_jpeg(pattern_pixels(h, w, 3, seed), h, w);
}
inline Bytes png_of(int h, int w, int seed) {
  return encode_png(pattern_pixels(h, w, 3, seed), h, w);
}

// The first `keep` of the bytes (a cut-short download).
inline Bytes truncated(Bytes bytes, size_t keep) {
  bytes.resize(std::min(keep, bytes.size()));
  return bytes;
}

// A PNG whose IDAT chunk's CRC is wrong (the chunk's last byte flipped).
inline Bytes png_with_bad_crc(Bytes png) {
  for (size_t i = 8; i + 12 <= png.size();) {
    const uint32_t length = (uint32_t(png[i]) << 24) | (uint32_t(png[i + 1]) << 16) |
                            (uint32_t(png[i + 2]) << 8) | uint32_t(png[i + 3]);
    if (std::memcmp(&png[i + 4], "IDAT", 4) == 0) {
      png[i + 8 + length + 3] ^= 0xFF;
      return png;
    }
    i += 12 + length;
  }
  ADD_FAILURE() << "no IDAT chunk";
  return png;
}

inline Bytes random_bytes(size_t n, uint32_t seed) {
  Bytes out(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& b : out) {
    s = s * 1664525u + 1013904223u;
    b = uint8_t(s >> 24);
  }
  return out;
}

// Pixels that make every decoding difference show: the pattern under strong noise, so that
// neighbouring chroma samples differ and an upsampling edge handled differently changes values.
inline Bytes noisy_pixels(int h, int w, int channels, int seed) {
  Bytes px = pattern_pixels(h, w, channels, seed);
  const Bytes noise = random_bytes(px.size(), uint32_t(seed) + 100);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t((px[i] + noise[i]) / 2);
  return px;
}

}  // namespace hg::data::test
