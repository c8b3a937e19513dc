// Decoding users' image files (JPEG through libjpeg-turbo's libjpeg API, PNG through libpng's
// simplified API) into RGB uint8 HWC pixels. The format is read from the first bytes (JPEG
// FF D8 FF, PNG's 8-byte signature), not the file name, so a PNG named .jpg decodes. Grayscale,
// palette and alpha images become RGB (alpha composited over black by libpng; CMYK JPEGs
// converted as Adobe writes them).
//
// A JPEG can be decoded smaller (libjpeg-turbo's DCT scalings: 1/8, 1/4 or 1/2) and in part (a
// region: the columns through jpeg_crop_scanline, the rows above skipped, none below decoded),
// for a loader that needs only a crop of it. The pixels of a region are the pixels a full decode
// at the same scaling has at those coordinates.
//
// Every failure (unknown format, corrupt or truncated data, a decoder warning, dimensions out
// of bounds) is an InvalidInput error naming the path and the decoder's reason. Dimensions are
// checked from the header before any pixel buffer is allocated. A JPEG decoded in part is
// checked for its end-of-image marker, so a cut-short file fails whatever the region; damage
// inside the entropy-coded data below the region is not seen (those rows are not decoded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hourglass/data/image_resize.h"

namespace hg::data {

// Limits on a decoded image, checked against the header before allocating: a side of at most
// 16384 pixels and at most 2^28 pixels (768 MiB of RGB) in all.
inline constexpr int64_t kMaxImageSide = 16384;
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 28;

enum class ImageFormat { Jpeg, Png, Unknown };

// The format the first bytes announce.
ImageFormat detect_image_format(const uint8_t* data, size_t size);

// The format of an encoded image and the height and width its header announces (checked against
// the limits), read without decoding its pixels; `path` names it in errors.
struct ImageHeader {
  ImageFormat format = ImageFormat::Unknown;
  int64_t height = 0;
  int64_t width = 0;
};
ImageHeader read_image_header(const uint8_t* data, size_t size, const std::string& path);

// What to decode. The whole image is decoded at the smallest of libjpeg-turbo's DCT scalings
// 1/8, 1/4, 1/2 and 1 that is still at least min_height x min_width (a minimum of 0: the full
// size in that dimension; PNGs always decode at full size): a crop that will be shrunk anyway
// costs a fraction of a full decode. (libjpeg-turbo's 3/8, 5/8, 3/4 and 7/8 are not used: its
// inverse DCTs for them are C code, slower than the full-size decode's SIMD ones.) `region`, when
// not empty, is the part of the image at that scaling (decoded_size) that is needed: a JPEG then
// decodes only the rows and columns covering it (the columns widened to libjpeg's block
// boundaries); a PNG decodes whole.
struct DecodeRequest {
  int64_t min_height = 0;
  int64_t min_width = 0;
  CropBox region;  // empty (height or width 0): the whole image
};

// The height and width of the whole image `header` describes at the scaling `request` picks.
struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
};
ImageSize decoded_size(const ImageHeader& header, int64_t min_height, int64_t min_width);

// Decoded pixels: rows [top, top + height) and columns [left, left + width) of the whole image
// at its decoded scaling, which is image_height x image_width.
struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  int64_t top = 0;
  int64_t left = 0;
  int64_t image_height = 0;
  int64_t image_width = 0;
  std::vector<uint8_t> pixels;  // height * width * 3, RGB, row-major HWC

  // The pixels as a region of the whole image, for resize_bilinear.
  ImageRegion region() const { return {pixels.data(), top, left, height, width, 3}; }
};

// Decodes an encoded image held in memory; `path` names it in errors. The result holds at least
// request.region (the whole image when it is empty).
DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& path,
                          const DecodeRequest& request = {});
// The same into `out`, whose pixel buffer keeps its memory when it is already large enough (a
// loader thread decodes image after image into one). On an error `out` is unspecified.
void decode_image_into(const uint8_t* data, size_t size, const std::string& path,
                       const DecodeRequest& request, DecodedImage& out);

// Reads the whole file at `path` (a regular file of at most kMaxImageFileBytes; InvalidInput
// naming it otherwise) and decodes it.
inline constexpr int64_t kMaxImageFileBytes = int64_t(1) << 30;
std::vector<uint8_t> read_image_file(const std::string& path);
DecodedImage read_image(const std::string& path);

}  // namespace hg::data
