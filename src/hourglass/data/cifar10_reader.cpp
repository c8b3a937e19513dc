// CIFAR-10 binary version (cifar-10-binary.tar.gz): files of fixed 3073-byte records, one
// label byte then a 32x32 image as three planes R, G, B (1024 bytes each, row-major). The
// planes are interleaved here into HWC, the layout every hourglass activation uses.
#include <algorithm>
#include <cstdint>

#include "hourglass/base/error.h"
#include "hourglass/data/byte_source.h"
#include "hourglass/data/dataset.h"

namespace hg::data {

namespace {

constexpr int64_t kSide = 32;
constexpr int64_t kChannels = 3;
constexpr int64_t kClasses = 10;
constexpr int64_t kImageBytes = kSide * kSide * kChannels;  // 3072
constexpr int64_t kRecordBytes = 1 + kImageBytes;           // 3073
constexpr const char* kSubdir = "cifar-10-batches-bin";     // what the archive unpacks to

std::vector<std::string> batch_files(Split split) {
  if (split == Split::Test) return {"test_batch.bin"};
  std::vector<std::string> files;
  for (int i = 1; i <= 5; ++i) files.push_back(fmt::format("data_batch_{}.bin", i));
  return files;
}

// `dir` itself, or its cifar-10-batches-bin subfolder when the files are only there.
std::string resolve_dir(const std::string& dir, const std::string& first_file) {
  if (file_exists(dir + "/" + first_file)) return dir;
  const std::string sub = dir + "/" + kSubdir;
  if (file_exists(sub + "/" + first_file)) return sub;
  throw_invalid(fmt::format("cifar10: file not found: {}/{}", dir, first_file),
                fmt::format("download the CIFAR-10 binary version (cifar-10-binary.tar.gz), unpack "
                            "it and point the path at its {} folder",
                            kSubdir));
}

// Appends the records of one file (at most `want` of them) to ds, converting CHW to HWC.
void read_batch_file(const std::string& path, int64_t want, ImageDataset& ds) {
  ByteSource src(path);
  std::vector<uint8_t> bytes;
  src.read_append(bytes, SIZE_MAX);  // whole file (about 30 MB); read_append grows in chunks
  const int64_t size = int64_t(bytes.size());
  if (size == 0) {
    throw_invalid(fmt::format("{}: empty file, expected records of {} bytes", path, kRecordBytes));
  }
  if (size % kRecordBytes != 0) {
    throw_invalid(fmt::format(
        "{}: size {} bytes is not a multiple of the {}-byte CIFAR-10 record "
        "(last record has {} of {} bytes){}",
        path, size, kRecordBytes, size % kRecordBytes, kRecordBytes, src.truncation_note()));
  }
  if (src.truncated()) {
    throw_invalid(fmt::format("{}: truncated data: the gzip stream ends before its trailer", path));
  }
  const int64_t records = std::min(size / kRecordBytes, want);
  const size_t old = ds.labels.size();
  ds.labels.resize(old + size_t(records));
  ds.pixels.resize((old + size_t(records)) * size_t(kImageBytes));
  constexpr int64_t plane = kSide * kSide;
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* rec = bytes.data() + r * kRecordBytes;
    if (rec[0] >= kClasses) {
      throw_invalid(fmt::format("{}: label {} at index {} is out of range for {} classes", path,
                                int(rec[0]), r, kClasses));
    }
    ds.labels[old + size_t(r)] = rec[0];
    uint8_t* out = ds.pixels.data() + (int64_t(old) + r) * kImageBytes;
    const uint8_t* planes = rec + 1;
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t c = 0; c < kChannels; ++c) out[p * kChannels + c] = planes[c * plane + p];
    }
  }
}

}  // namespace

ImageDataset load_cifar10(const std::string& dir, Split split, int64_t limit) {
  HG_CHECK(limit >= 0, "load_cifar10: limit must be >= 0 (0 keeps all samples), got {}", limit);
  const std::vector<std::string> files = batch_files(split);
  const std::string root = resolve_dir(dir, files.front());
  // Check every file exists before reading any: a missing fifth batch should not cost the
  // time of reading the first four.
  for (const std::string& f : files) {
    if (!file_exists(root + "/" + f)) {
      throw_invalid(fmt::format("cifar10: file not found: {}/{}", root, f),
                    "the CIFAR-10 binary version has data_batch_1.bin .. data_batch_5.bin and "
                    "test_batch.bin; re-unpack cifar-10-binary.tar.gz");
    }
  }
  ImageDataset ds;
  ds.name = "cifar10";
  ds.source = files.size() == 1 ? root + "/" + files.front()
                                : fmt::format("{}/{} .. {}", root, files.front(), files.back());
  ds.height = kSide;
  ds.width = kSide;
  ds.channels = kChannels;
  ds.num_classes = kClasses;
  for (const std::string& f : files) {
    const int64_t want = limit > 0 ? limit - ds.size() : INT64_MAX;
    if (want <= 0) break;
    read_batch_file(root + "/" + f, want, ds);
  }
  return ds;
}

}  // namespace hg::data
