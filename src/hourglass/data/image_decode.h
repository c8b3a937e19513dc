// Decoding users' image files (JPEG through libjpeg-turbo's TurboJPEG API, PNG through
// libpng's simplified API) into RGB uint8 HWC pixels. The format is read from the first bytes
// (JPEG FF D8 FF, PNG's 8-byte signature), not the file name, so a PNG named .jpg decodes.
// Grayscale, palette and alpha images become RGB (alpha composited over black by libpng; CMYK
// JPEGs converted as Adobe writes them).
//
// Every failure (unknown format, corrupt or truncated data, a decoder warning, dimensions out
// of bounds) is an InvalidInput error naming the path and the decoder's reason. Dimensions are
// checked from the header before any pixel buffer is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hg::data {

// Limits on a decoded image, checked against the header before allocating: a side of at most
// 16384 pixels and at most 2^28 pixels (768 MiB of RGB) in all.
inline constexpr int64_t kMaxImageSide = 16384;
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 28;

enum class ImageFormat { Jpeg, Png, Unknown };

// The format the first bytes announce.
ImageFormat detect_image_format(const uint8_t* data, size_t size);

struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;  // height * width * 3, RGB, row-major HWC
};

// The height and width an encoded image's header announces (checked against the limits), read
// without decoding its pixels; `path` names it in errors.
struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
};
ImageSize read_image_size(const uint8_t* data, size_t size, const std::string& path);

// Decodes an encoded image held in memory; `path` names it in errors. A JPEG is decoded at the
// smallest of libjpeg-turbo's DCT scalings (k/8 of its size, k = 1..8) that is still at least
// min_height x min_width: a crop that will be shrunk anyway costs a fraction of a full decode.
// A minimum of 0 asks for the full size in that dimension; PNGs always decode at full size.
DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& path,
                          int64_t min_height = 0, int64_t min_width = 0);
// The same into `out`, whose pixel buffer keeps its memory when it is already large enough (a
// loader thread decodes image after image into one). On an error `out` is unspecified.
void decode_image_into(const uint8_t* data, size_t size, const std::string& path,
                       int64_t min_height, int64_t min_width, DecodedImage& out);

// Reads the whole file at `path` (a regular file of at most kMaxImageFileBytes; InvalidInput
// naming it otherwise) and decodes it.
inline constexpr int64_t kMaxImageFileBytes = int64_t(1) << 30;
std::vector<uint8_t> read_image_file(const std::string& path);
DecodedImage read_image(const std::string& path);

}  // namespace hg::data
