// JPEG and PNG decoding behind one function; each library is used only in this file.
#include "hourglass/data/image_decode.h"

#include <fcntl.h>
#include <png.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

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

// One decompressor per thread, kept for the thread's life (the loader's workers decode many
// images; creating one costs allocations).
struct TjHandle {
  tjhandle handle = tjInitDecompress();
  ~TjHandle() {
    if (handle != nullptr) tjDestroy(handle);
  }
};

tjhandle jpeg_decoder(const std::string& path) {
  thread_local TjHandle tj;
  if (tj.handle == nullptr)
    throw_runtime(
        fmt::format("{}: cannot start the JPEG decoder: {}", path, tjGetErrorStr2(nullptr)));
  return tj.handle;
}

struct JpegHeader {
  int width = 0, height = 0, colorspace = 0;
};

JpegHeader read_jpeg_header(tjhandle tj, const uint8_t* data, size_t size,
                            const std::string& path) {
  JpegHeader h;
  int subsampling = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &h.width, &h.height,
                          &subsampling, &h.colorspace) != 0)
    throw_invalid(fmt::format("{}: corrupt JPEG header: {}", path, tjGetErrorStr2(tj)));
  check_dimensions(h.width, h.height, path, "JPEG");
  return h;
}

// The smallest DCT scaling of width x height (k/8, as libjpeg-turbo offers them) that is at
// least min_width x min_height (a minimum of 0: the full size); the full size when none
// smaller is.
std::pair<int, int> jpeg_decode_size(int width, int height, int64_t min_width, int64_t min_height) {
  if (min_width <= 0) min_width = width;  // no minimum: the full size
  if (min_height <= 0) min_height = height;
  int best_w = width, best_h = height;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; factors != nullptr && i < count; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num > f.denom) continue;  // no enlarging
    const int w = TJSCALED(width, f), h = TJSCALED(height, f);
    if (w >= min_width && h >= min_height && int64_t(w) * h < int64_t(best_w) * best_h) {
      best_w = w;
      best_h = h;
    }
  }
  return {best_w, best_h};
}

void decode_jpeg(const uint8_t* data, size_t size, const std::string& path, int64_t min_height,
                 int64_t min_width, DecodedImage& img) {
  const tjhandle tj = jpeg_decoder(path);
  const auto length = static_cast<unsigned long>(size);
  const JpegHeader header = read_jpeg_header(tj, data, size, path);
  const auto [width, height] = jpeg_decode_size(header.width, header.height, min_width, min_height);
  const int colorspace = header.colorspace;
  img.height = height;
  img.width = width;
  const size_t pixels = size_t(width) * size_t(height);
  // libjpeg does not convert CMYK to RGB: decode the four channels and convert below.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<uint8_t> cmyk_buffer;
  if (cmyk)
    cmyk_buffer.resize(pixels * 4);
  else
    img.pixels.resize(pixels * 3);  // keeps the buffer's memory when it is large enough
  uint8_t* target = cmyk ? cmyk_buffer.data() : img.pixels.data();
  // A warning (a cut-short file: "Premature end of JPEG file") also returns -1: the decoder
  // filled the missing part with grey, which must not reach training as if it were the image.
  if (tjDecompress2(tj, data, length, target, width, 0, height, cmyk ? TJPF_CMYK : TJPF_RGB, 0) !=
      0)
    throw_invalid(fmt::format("{}: corrupt JPEG data: {}", path, tjGetErrorStr2(tj)));
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
  img.height = image.height;
  img.width = image.width;
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

ImageSize read_image_size(const uint8_t* data, size_t size, const std::string& path) {
  switch (detect_image_format(data, size)) {
    case ImageFormat::Jpeg: {
      const JpegHeader h = read_jpeg_header(jpeg_decoder(path), data, size, path);
      return {h.height, h.width};
    }
    case ImageFormat::Png: {
      const PngRead read(data, size, path);
      return {int64_t(read.image.height), int64_t(read.image.width)};
    }
    case ImageFormat::Unknown: break;
  }
  throw_unknown_format(size, path);
}

void decode_image_into(const uint8_t* data, size_t size, const std::string& path,
                       int64_t min_height, int64_t min_width, DecodedImage& out) {
  switch (detect_image_format(data, size)) {
    case ImageFormat::Jpeg: return decode_jpeg(data, size, path, min_height, min_width, out);
    case ImageFormat::Png: return decode_png(data, size, path, out);
    case ImageFormat::Unknown: break;
  }
  throw_unknown_format(size, path);
}

DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& path,
                          int64_t min_height, int64_t min_width) {
  DecodedImage img;
  decode_image_into(data, size, path, min_height, min_width, img);
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
