// IDX files (LeCun's MNIST format, also used by Fashion-MNIST): a big-endian header of a magic
// number 0x0000TTDD (TT = element type, 0x08 for u8; DD = number of dimensions), then one
// 32-bit size per dimension, then the elements in row-major order.
#include <algorithm>
#include <array>

#include "hourglass/base/error.h"
#include "hourglass/data/byte_source.h"
#include "hourglass/data/dataset.h"

namespace hg::data {

namespace {

constexpr uint32_t kU8Type = 0x08;
constexpr uint32_t kImagesMagic = 0x00000803;  // u8, 3 dimensions: [N, H, W]
constexpr uint32_t kLabelsMagic = 0x00000801;  // u8, 1 dimension: [N]
// Far beyond any real image set; rejects headers whose sizes would overflow or exhaust memory.
constexpr uint64_t kMaxPixelBytes = uint64_t(1) << 40;

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// Reads and checks the header of a u8 IDX file with `dims` dimensions; returns the sizes.
std::vector<uint32_t> read_header(ByteSource& src, uint32_t expected_magic, const char* what) {
  const uint32_t dims = expected_magic & 0xff;
  const size_t header_bytes = 4 * (1 + dims);
  std::array<uint8_t, 4 * 4> header{};
  const size_t got = src.read(header.data(), header_bytes);
  if (got < 4) {
    throw_invalid(
        fmt::format("{}: truncated header: expected {} bytes of IDX {} header, found {}{}",
                    src.path(), header_bytes, what, got, src.truncation_note()));
  }
  const uint32_t magic = be32(header.data());
  if ((magic >> 8) == kU8Type && (magic & 0xff) != dims) {
    // A u8 IDX file of another rank, most often the labels and images files swapped.
    throw_invalid(fmt::format(
        "{}: wrong number of dimensions for an IDX {} file: expected {} (magic 0x{:08x}), "
        "found {} (magic 0x{:08x})",
        src.path(), what, dims, expected_magic, magic & 0xff, magic));
  }
  if (magic != expected_magic) {
    throw_invalid(
        fmt::format("{}: bad magic number for an IDX {} file: expected 0x{:08x}, "
                    "found 0x{:08x}",
                    src.path(), what, expected_magic, magic));
  }
  if (got < header_bytes) {
    throw_invalid(
        fmt::format("{}: truncated header: expected {} bytes of IDX {} header, found {}{}",
                    src.path(), header_bytes, what, got, src.truncation_note()));
  }
  std::vector<uint32_t> sizes(dims);
  for (uint32_t d = 0; d < dims; ++d) sizes[d] = be32(header.data() + 4 * (1 + d));
  return sizes;
}

// After the declared data: anything more means the header and the data disagree.
void expect_end(ByteSource& src, const std::string& declared) {
  const bool more = !src.at_end();
  // All the data arrived but the gzip trailer (length and CRC) did not: the file was cut
  // short, and nothing vouches for the data.
  if (src.truncated()) {
    throw_invalid(
        fmt::format("{}: truncated data: the gzip stream ends before its trailer", src.path()));
  }
  if (more) {
    throw_invalid(
        fmt::format("{}: unexpected data after the {} the header declares", src.path(), declared));
  }
}

// {dir}/{base}.gz if present, else {dir}/{base}; a missing pair is an error naming both.
std::string find_idx_file(const std::string& dataset, const std::string& dir,
                          const std::string& base) {
  const std::string plain = dir + "/" + base;
  const std::string gz = plain + ".gz";
  if (file_exists(gz)) return gz;
  if (file_exists(plain)) return plain;
  std::string remedy =
      fmt::format("point the {} path at the folder holding {}[.gz]", dataset, base);
  if (dataset == "fashion-mnist") {
    remedy = "install it with `apt-get install dataset-fashion-mnist`, or " + remedy;
  }
  throw_invalid(fmt::format("{}: file not found: {} (nor {})", dataset, gz, plain), remedy);
}

ImageDataset load_idx_dir(const std::string& dataset, const std::string& dir, Split split,
                          int64_t limit) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images = find_idx_file(dataset, dir, prefix + "-images-idx3-ubyte");
  const std::string labels = find_idx_file(dataset, dir, prefix + "-labels-idx1-ubyte");
  ImageDataset ds = read_idx(images, labels, 10, limit);
  ds.name = dataset;
  return ds;
}

}  // namespace

ImageDataset read_idx(const std::string& images_path, const std::string& labels_path,
                      int64_t num_classes, int64_t limit) {
  HG_CHECK(num_classes >= 1 && num_classes <= 256,
           "read_idx: num_classes must be in [1, 256] for u8 labels, got {}", num_classes);
  HG_CHECK(limit >= 0, "read_idx: limit must be >= 0 (0 keeps all samples), got {}", limit);

  ByteSource images(images_path);
  ByteSource labels(labels_path);
  const std::vector<uint32_t> image_dims = read_header(images, kImagesMagic, "images");
  const std::vector<uint32_t> label_dims = read_header(labels, kLabelsMagic, "labels");
  const uint64_t count = image_dims[0];
  const uint64_t rows = image_dims[1];
  const uint64_t cols = image_dims[2];
  if (rows == 0 || cols == 0) {
    throw_invalid(fmt::format("{}: the header declares empty images of {}x{} pixels", images_path,
                              rows, cols));
  }
  if (label_dims[0] != count) {
    throw_invalid(
        fmt::format("images/labels count mismatch: {} holds {} images but {} holds {} "
                    "labels",
                    images_path, count, labels_path, label_dims[0]));
  }
  // rows, cols < 2^32, so rows * cols cannot overflow; the product with count is checked.
  const uint64_t image_bytes = rows * cols;
  if (count > kMaxPixelBytes / image_bytes) {
    throw_invalid(fmt::format("{}: the header declares an implausible size: {} images of {}x{}",
                              images_path, count, rows, cols));
  }
  const bool limited = limit > 0 && uint64_t(limit) < count;
  const uint64_t keep = limited ? uint64_t(limit) : count;

  ImageDataset ds;
  ds.name = "idx";
  ds.source = images_path + " and " + labels_path;
  ds.height = int64_t(rows);
  ds.width = int64_t(cols);
  ds.channels = 1;
  ds.num_classes = num_classes;

  const uint64_t pixel_bytes = keep * image_bytes;
  const size_t got_pixels = images.read_append(ds.pixels, pixel_bytes);
  if (got_pixels < pixel_bytes) {
    throw_invalid(fmt::format(
        "{}: truncated data: expected {} bytes of pixels for {} images of "
        "{}x{}, found {}{}",
        images_path, pixel_bytes, keep, rows, cols, got_pixels, images.truncation_note()));
  }
  const size_t got_labels = labels.read_append(ds.labels, keep);
  if (got_labels < keep) {
    throw_invalid(fmt::format("{}: truncated data: expected {} bytes of labels, found {}{}",
                              labels_path, keep, got_labels, labels.truncation_note()));
  }
  if (!limited) {
    expect_end(images, fmt::format("{} images", count));
    expect_end(labels, fmt::format("{} labels", count));
  }
  for (size_t i = 0; i < ds.labels.size(); ++i) {
    if (ds.labels[i] >= num_classes) {
      throw_invalid(fmt::format("{}: label {} at index {} is out of range for {} classes",
                                labels_path, int(ds.labels[i]), i, num_classes));
    }
  }
  return ds;
}

std::optional<DatasetShape> peek_idx_dir(const std::string& dataset, const std::string& dir,
                                         Split split, int64_t limit) {
  try {
    const std::string prefix = split == Split::Train ? "train" : "t10k";
    ByteSource images(find_idx_file(dataset, dir, prefix + "-images-idx3-ubyte"));
    const std::vector<uint32_t> dims = read_header(images, kImagesMagic, "images");
    if (dims[1] == 0 || dims[2] == 0) return std::nullopt;
    DatasetShape s;
    s.height = int64_t(dims[1]);
    s.width = int64_t(dims[2]);
    s.channels = 1;
    s.num_classes = 10;  // as load_idx_dir reads the labels
    s.size = limit > 0 ? std::min<int64_t>(limit, dims[0]) : int64_t(dims[0]);
    return s;
  } catch (const Error&) {
    return std::nullopt;  // load_dataset reports it
  }
}

ImageDataset load_fashion_mnist(const std::string& dir, Split split, int64_t limit) {
  return load_idx_dir("fashion-mnist", dir, split, limit);
}

ImageDataset load_mnist(const std::string& dir, Split split, int64_t limit) {
  return load_idx_dir("mnist", dir, split, limit);
}

}  // namespace hg::data
