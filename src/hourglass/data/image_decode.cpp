// JPEG and PNG decoding behind one function; each library is used only in this file.
#include "hourglass/data/image_decode.h"

#include <fcntl.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t without declaring them
#include <cstring>
#include <memory>
#include <utility>

#include <jpeglib.h>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"

namespace hg::data {

namespace {

void check_dimensions(int64_t width, int64_t height, const std::string& path, const char* format) {
  if (width >= 1 && height >= 1 && width <= kMaxImageSide && height <= kMaxImageSide &&
      width * height <= kMaxImagePixels)
    return;
  throw_invalid(fmt::format("{}: {} image of {}x{} pixels is outside the limits (1 to {} pixels "
                            "a side, at most {} pixels)",
                            path, format, width, height, kMaxImageSide, kMaxImagePixels),
                "resize the image, or remove it from the dataset");
}

// ---- JPEG: libjpeg-turbo's libjpeg API

// libjpeg's error manager. An error, and a warning (corrupt data that libjpeg would paper over,
// such as a cut-short file's missing rows filled with grey), ends the libjpeg call in progress
// with a longjmp back to guarded(), libjpeg's message kept; libjpeg never exits the process.
struct JpegErrors {
  jpeg_error_mgr manager;  // first: libjpeg's pointer to it is a pointer to this
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);  // a warning; levels >= 0 are trace messages
}

// One decompressor per thread, kept for the thread's life (the loader's workers decode many
// images; creating one costs allocations).
struct JpegDecoder {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  bool created = false;
  std::vector<JSAMPROW> rows;  // jpeg_read_scanlines' row pointers
  JpegDecoder() {
    std::memset(&cinfo, 0, sizeof cinfo);
    std::memset(&errors, 0, sizeof errors);
    cinfo.err = jpeg_std_error(&errors.manager);
    errors.manager.error_exit = jpeg_fail;
    errors.manager.emit_message = jpeg_message;
  }
  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
};

// Runs `step` (libjpeg calls on plain values only: nothing in it has a destructor, so the
// longjmp of an error skips nothing) with libjpeg's errors caught: false, with libjpeg's message
// in d.errors.message, when libjpeg failed or warned.
template <typename Step>
bool guarded(JpegDecoder& d, const Step& step) {
  if (setjmp(d.errors.jump) != 0) return false;
  step();
  return true;
}

JpegDecoder& jpeg_decoder(const std::string& path) {
  thread_local JpegDecoder d;
  if (!d.created) {
    if (!guarded(d, [&] { jpeg_create_decompress(&d.cinfo); }))
      throw_runtime(fmt::format("{}: cannot start the JPEG decoder: {}", path, d.errors.message));
    d.created = true;
  }
  return d;
}

// Leaves the thread's decompressor ready for the next image however the decoding ends
// (jpeg_abort_decompress is valid in any state and raises no error).
struct JpegReset {
  JpegDecoder& d;
  ~JpegReset() { jpeg_abort_decompress(&d.cinfo); }
};

// Points the decompressor at `data` and reads the header up to the first scan's data; checks
// the dimensions.
ImageHeader start_jpeg(JpegDecoder& d, const uint8_t* data, size_t size, const std::string& path) {
  if (!guarded(d, [&] {
        jpeg_mem_src(&d.cinfo, data, static_cast<unsigned long>(size));
        jpeg_read_header(&d.cinfo, TRUE);
      }))
    throw_invalid(fmt::format("{}: corrupt JPEG header: {}", path, d.errors.message));
  ImageHeader h{ImageFormat::Jpeg, int64_t(d.cinfo.image_height), int64_t(d.cinfo.image_width)};
  check_dimensions(h.width, h.height, path, "JPEG");
  return h;
}

// The smallest DCT scaling k/8 with k in {1, 2, 4, 8} at which height x width is still at
// least min_height x min_width (a minimum of 0: the full size); 8 when none smaller is.
// libjpeg's scaled size of n pixels is ceil(n * k / 8). libjpeg-turbo has SIMD inverse DCTs for
// these scalings only; at 3/8, 5/8, 6/8 and 7/8 it runs C ones (and 4:2:0 chroma at 2k/16 in C,
// in place of its SIMD upsampling), which made a 500x375 JPEG slower to decode at 5/8-7/8 than
// at full size (bench_loader's BM_JpegDecodeScaled), so those are not used.
int64_t scaled_extent(int64_t n, int k) { return (n * k + 7) / 8; }

int jpeg_scale(int64_t height, int64_t width, int64_t min_height, int64_t min_width) {
  if (min_height <= 0) min_height = height;
  if (min_width <= 0) min_width = width;
  for (const int k : {1, 2, 4})
    if (scaled_extent(height, k) >= min_height && scaled_extent(width, k) >= min_width) return k;
  return 8;
}

// Whether an end-of-image marker (FF D9) follows the first scan's start: a file cut short has
// none (libjpeg's source adds a fake one and warns, but only when it reads that far).
bool has_end_marker(const uint8_t* data, size_t from, size_t size) {
  for (size_t i = size; i >= from + 2; --i)
    if (data[i - 2] == 0xFF && data[i - 1] == 0xD9) return true;
  return false;
}

// A region decoded in part differs from the full decode in its outermost columns where fancy
// (smooth) chroma upsampling treats the region's edges as the image's (libjpeg.txt, "Partial
// image decompression"). The columns asked of jpeg_crop_scanline therefore reach this many
// pixels beyond the region on each side (within the image), so that the region itself holds a
// full decode's pixels (tests/data/test_image_decode.cpp compares them).
constexpr int64_t kCropMargin = 1;
// Nor does a partial row two pixels wide at the image's left edge (one 4:2:0 chroma sample: its
// first pixel differs; found by comparing every region of small 4:2:0 images), so the columns
// asked for are at least this many.
constexpr int64_t kMinCropWidth = 4;

[[noreturn]] void throw_corrupt_jpeg(const JpegDecoder& d, const std::string& path) {
  throw_invalid(fmt::format("{}: corrupt JPEG data: {}", path, d.errors.message));
}

void decode_jpeg(const uint8_t* data, size_t size, const std::string& path,
                 const DecodeRequest& request, DecodedImage& img) {
  JpegDecoder& d = jpeg_decoder(path);
  const JpegReset reset{d};
  jpeg_decompress_struct& cinfo = d.cinfo;
  const ImageHeader header = start_jpeg(d, data, size, path);
  const size_t scan_start = size - cinfo.src->bytes_in_buffer;
  // libjpeg does not convert CMYK to RGB: decode the four channels and convert below.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.scale_num =
      unsigned(jpeg_scale(header.height, header.width, request.min_height, request.min_width));
  cinfo.scale_denom = 8;
  if (!guarded(d, [&] { jpeg_start_decompress(&cinfo); })) throw_corrupt_jpeg(d, path);
  img.image_height = cinfo.output_height;
  img.image_width = cinfo.output_width;
  // The rows and columns to decode: the region asked for within the image, all of it when
  // none; columns widened by the margin, then by jpeg_crop_scanline to its block boundaries.
  const CropBox& r = request.region;
  const bool whole = r.height <= 0 || r.width <= 0;
  const int64_t top = whole ? 0 : std::clamp<int64_t>(r.top, 0, img.image_height - 1);
  const int64_t bottom =
      whole ? img.image_height : std::clamp<int64_t>(r.top + r.height, top + 1, img.image_height);
  const int64_t left =
      whole ? 0 : std::clamp<int64_t>(r.left - kCropMargin, 0, img.image_width - 1);
  const int64_t right =
      whole ? img.image_width
            : std::clamp<int64_t>(std::max(r.left + r.width + kCropMargin, left + kMinCropWidth),
                                  left + 1, img.image_width);
  auto x = JDIMENSION(left), width = JDIMENSION(right - left);
  if (width != cinfo.output_width && !guarded(d, [&] { jpeg_crop_scanline(&cinfo, &x, &width); }))
    throw_corrupt_jpeg(d, path);
  img.top = top;
  img.left = x;
  img.height = bottom - top;
  img.width = width;
  const size_t pixels = size_t(img.height) * size_t(img.width);
  const int channels = cmyk ? 4 : 3;
  std::vector<uint8_t> cmyk_buffer;
  if (cmyk)
    cmyk_buffer.resize(pixels * 4);
  else
    img.pixels.resize(pixels * 3);  // keeps the buffer's memory when it is large enough
  uint8_t* target = cmyk ? cmyk_buffer.data() : img.pixels.data();
  d.rows.resize(size_t(img.height));
  for (int64_t y = 0; y < img.height; ++y)
    d.rows[size_t(y)] = target + size_t(y) * size_t(img.width) * size_t(channels);
  const auto first = JDIMENSION(top), end = JDIMENSION(bottom);
  JSAMPROW* rows = d.rows.data();
  if (!guarded(d, [&] {
        if (first > 0) jpeg_skip_scanlines(&cinfo, first);
        while (cinfo.output_scanline < end)
          jpeg_read_scanlines(&cinfo, rows + (cinfo.output_scanline - first),
                              end - cinfo.output_scanline);
        // The last row read: read to the end-of-image marker, as a full decode does.
        if (end == cinfo.output_height) jpeg_finish_decompress(&cinfo);
      }))
    throw_corrupt_jpeg(d, path);
  // Rows below the region are not decoded (JpegReset aborts); a file cut short must still fail.
  if (end != img.image_height && !has_end_marker(data, scan_start, size))
    throw_invalid(
        fmt::format("{}: corrupt JPEG data: Premature end of JPEG file (no "
                    "end-of-image marker)",
                    path));
  if (!cmyk) return;
  const std::vector<uint8_t>& buffer = cmyk_buffer;
  // Adobe's CMYK JPEGs store inverted values, which libjpeg hands back as they are stored:
  // channel value = 255 - ink, so R = C' * K' / 255 (as PIL converts them).
  img.pixels.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const unsigned k = buffer[i * 4 + 3];
    for (size_t c = 0; c < 3; ++c)
      img.pixels[i * 3 + c] = uint8_t((buffer[i * 4 + c] * k + 127) / 255);
  }
}

// ---- PNG

// libpng's simplified reader over `data` with its header read and the dimensions checked; its
// state is freed with it (freeing again after a failure is harmless).
struct PngRead {
  png_image image;
  PngRead(const uint8_t* data, size_t size, const std::string& path) {
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (png_image_begin_read_from_memory(&image, data, size) == 0)
      throw_invalid(fmt::format("{}: corrupt PNG: {}", path, image.message));
    // A constructor that throws runs no destructor: free the reader's state first.
    try {
      check_dimensions(image.width, image.height, path, "PNG");
    } catch (...) {
      png_image_free(&image);
      throw;
    }
  }
  ~PngRead() { png_image_free(&image); }
  PngRead(const PngRead&) = delete;
  PngRead& operator=(const PngRead&) = delete;
};

void decode_png(const uint8_t* data, size_t size, const std::string& path, DecodedImage& img) {
  PngRead read(data, size, path);
  png_image& image = read.image;
  image.format = PNG_FORMAT_RGB;
  img.height = img.image_height = image.height;
  img.width = img.image_width = image.width;
  img.top = img.left = 0;
  img.pixels.resize(size_t(image.width) * image.height * 3);
  png_color black{0, 0, 0};  // alpha is composited over black
  if (png_image_finish_read(&image, &black, img.pixels.data(), 0, nullptr) == 0)
    throw_invalid(fmt::format("{}: corrupt PNG: {}", path, image.message));
  // libpng reports some faults (a bad CRC in an ancillary chunk) as warnings and goes on.
  if ((image.warning_or_error & PNG_IMAGE_ERROR) != 0)
    throw_invalid(fmt::format("{}: corrupt PNG: {}", path, image.message));
}

[[noreturn]] void throw_unknown_format(size_t size, const std::string& path) {
  throw_invalid(fmt::format("{}: not a JPEG or PNG image ({} bytes, starting with neither "
                            "FF D8 FF nor the PNG signature)",
                            path, size),
                "convert the image to JPEG or PNG, or remove it from the dataset");
}

}  // namespace

ImageFormat detect_image_format(const uint8_t* data, size_t size) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::Jpeg;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::Png;
  return ImageFormat::Unknown;
}

ImageHeader read_image_header(const uint8_t* data, size_t size, const std::string& path) {
  switch (detect_image_format(data, size)) {
    case ImageFormat::Jpeg: {
      JpegDecoder& d = jpeg_decoder(path);
      const JpegReset reset{d};
      return start_jpeg(d, data, size, path);
    }
    case ImageFormat::Png: {
      const PngRead read(data, size, path);
      return {ImageFormat::Png, int64_t(read.image.height), int64_t(read.image.width)};
    }
    case ImageFormat::Unknown: break;
  }
  throw_unknown_format(size, path);
}

ImageSize decoded_size(const ImageHeader& header, int64_t min_height, int64_t min_width) {
  if (header.format != ImageFormat::Jpeg) return {header.height, header.width};
  const int k = jpeg_scale(header.height, header.width, min_height, min_width);
  return {scaled_extent(header.height, k), scaled_extent(header.width, k)};
}

void decode_image_into(const uint8_t* data, size_t size, const std::string& path,
                       const DecodeRequest& request, DecodedImage& out) {
  switch (detect_image_format(data, size)) {
    case ImageFormat::Jpeg: return decode_jpeg(data, size, path, request, out);
    case ImageFormat::Png: return decode_png(data, size, path, out);
    case ImageFormat::Unknown: break;
  }
  throw_unknown_format(size, path);
}

DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& path,
                          const DecodeRequest& request) {
  DecodedImage img;
  decode_image_into(data, size, path, request, img);
  return img;
}

std::vector<uint8_t> read_image_file(const std::string& path) {
  require_regular_file(path, "image file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_invalid(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_on_exit{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw_invalid(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  if (st.st_size > kMaxImageFileBytes)
    throw_invalid(fmt::format("{}: {} bytes is more than an image file may hold ({})", path,
                              int64_t(st.st_size), kMaxImageFileBytes));
  std::vector<uint8_t> bytes(size_t(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_invalid(fmt::format("{}: read error: {}", path, std::strerror(errno)));
    if (n == 0) break;  // the file shrank under us: decode what is there
    done += size_t(n);
  }
  bytes.resize(done);
  return bytes;
}

DecodedImage read_image(const std::string& path) {
  const std::vector<uint8_t> bytes = read_image_file(path);
  return decode_image(bytes.data(), bytes.size(), path);
}

}  // namespace hg::data
