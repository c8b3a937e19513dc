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

struct TjHandle {
  tjhandle handle = tjInitDecompress();
  ~TjHandle() {
    if (handle != nullptr) tjDestroy(handle);
  }
};

DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& path) {
  TjHandle tj;
  if (tj.handle == nullptr)
    throw_runtime(
        fmt::format("{}: cannot start the JPEG decoder: {}", path, tjGetErrorStr2(nullptr)));
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  const auto length = static_cast<unsigned long>(size);
  if (tjDecompressHeader3(tj.handle, data, length, &width, &height, &subsampling, &colorspace) != 0)
    throw_invalid(fmt::format("{}: corrupt JPEG header: {}", path, tjGetErrorStr2(tj.handle)));
  check_dimensions(width, height, path, "JPEG");
  DecodedImage img;
  img.height = height;
  img.width = width;
  const size_t pixels = size_t(width) * size_t(height);
  // libjpeg does not convert CMYK to RGB: decode the four channels and convert below.
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<uint8_t> buffer(pixels * (cmyk ? 4 : 3));
  // A warning (a cut-short file: "Premature end of JPEG file") also returns -1: the decoder
  // filled the missing part with grey, which must not reach training as if it were the image.
  if (tjDecompress2(tj.handle, data, length, buffer.data(), width, 0, height,
                    cmyk ? TJPF_CMYK : TJPF_RGB, 0) != 0)
    throw_invalid(fmt::format("{}: corrupt JPEG data: {}", path, tjGetErrorStr2(tj.handle)));
  if (!cmyk) {
    img.pixels = std::move(buffer);
    return img;
  }
  // Adobe's CMYK JPEGs store inverted values, which libjpeg hands back as they are stored:
  // channel value = 255 - ink, so R = C' * K' / 255 (as PIL converts them).
  img.pixels.resize(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const unsigned k = buffer[i * 4 + 3];
    for (size_t c = 0; c < 3; ++c)
      img.pixels[i * 3 + c] = uint8_t((buffer[i * 4 + c] * k + 127) / 255);
  }
  return img;
}

DecodedImage decode_png(const uint8_t* data, size_t size, const std::string& path) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  // The simplified API frees its state on failure; freeing again is harmless.
  struct Free {
    png_image* image;
    ~Free() { png_image_free(image); }
  } free_on_exit{&image};
  if (png_image_begin_read_from_memory(&image, data, size) == 0)
    throw_invalid(fmt::format("{}: corrupt PNG: {}", path, image.message));
  check_dimensions(image.width, image.height, path, "PNG");
  image.format = PNG_FORMAT_RGB;
  DecodedImage img;
  img.height = image.height;
  img.width = image.width;
  img.pixels.resize(size_t(image.width) * image.height * 3);
  png_color black{0, 0, 0};  // alpha is composited over black
  if (png_image_finish_read(&image, &black, img.pixels.data(), 0, nullptr) == 0)
    throw_invalid(fmt::format("{}: corrupt PNG: {}", path, image.message));
  // libpng reports some faults (a bad CRC in an ancillary chunk) as warnings and goes on.
  if ((image.warning_or_error & PNG_IMAGE_ERROR) != 0)
    throw_invalid(fmt::format("{}: corrupt PNG: {}", path, image.message));
  return img;
}

}  // namespace

ImageFormat detect_image_format(const uint8_t* data, size_t size) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::Jpeg;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::Png;
  return ImageFormat::Unknown;
}

DecodedImage decode_image(const uint8_t* data, size_t size, const std::string& path) {
  switch (detect_image_format(data, size)) {
    case ImageFormat::Jpeg: return decode_jpeg(data, size, path);
    case ImageFormat::Png: return decode_png(data, size, path);
    case ImageFormat::Unknown: break;
  }
  throw_invalid(fmt::format("{}: not a JPEG or PNG image ({} bytes, starting with neither "
                            "FF D8 FF nor the PNG signature)",
                            path, size),
                "convert the image to JPEG or PNG, or remove it from the dataset");
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
