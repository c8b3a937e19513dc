// CIFAR-10 and CIFAR-100 from whichever form a user has on disk: the binary or the python
// version, unpacked or still in its .tar.gz (read in place). This file finds the data and reads
// its batches in order; cifar10_batch.cpp decodes a batch, tar_gz_reader.cpp reads archive
// members.
//
// Where load_cifar10 looks, first match wins (the unpacked forms are faster to read):
//   1. the binary version unpacked: <dir>/data_batch_1.bin, or in <dir>/cifar-10-batches-bin
//   2. the python version unpacked: <dir>/data_batch_1, or in <dir>/cifar-10-batches-py
//      (torchvision's root folder holds cifar-10-batches-py beside the archive)
//   3. the archives <dir>/cifar-10-binary.tar.gz, then <dir>/cifar-10-python.tar.gz
// (test_batch instead of data_batch_1 for the test split), or <dir> is itself an archive.
// load_cifar100 likewise with train.bin / test.bin in cifar-100-binary, train / test in
// cifar-100-python, and the archives cifar-100-binary.tar.gz and cifar-100-python.tar.gz.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/data/byte_source.h"
#include "hourglass/data/cifar10_batch.h"
#include "hourglass/data/dataset.h"
#include "hourglass/data/tar_gz_reader.h"

namespace hg::data {

namespace {

using namespace cifar10;

enum class Format { Binary, Python };

// Where a CIFAR dataset's files are, as its archives unpack, and what they hold.
struct Layout {
  Kind kind;
  const char* binary_folder;  // what the archives unpack to
  const char* python_folder;
  const char* binary_archive;
  const char* python_archive;
  std::vector<std::string> train_batches;  // in order, without the binary version's ".bin"
  std::string test_batch;

  // The split's batches in order.
  std::vector<std::string> batch_names(Split split) const {
    return split == Split::Test ? std::vector<std::string>{test_batch} : train_batches;
  }
  const char* folder_of(Format format) const {
    return format == Format::Binary ? binary_folder : python_folder;
  }
  const char* archive_of(Format format) const {
    return format == Format::Binary ? binary_archive : python_archive;
  }
  size_t max_bytes(Format format) const {
    return format == Format::Binary ? kind.max_binary_bytes() : kind.max_python_bytes;
  }
};

Layout cifar10_layout() {
  std::vector<std::string> train;
  for (int i = 1; i <= 5; ++i) train.push_back(fmt::format("data_batch_{}", i));
  return Layout{kCifar10,
                "cifar-10-batches-bin",
                "cifar-10-batches-py",
                "cifar-10-binary.tar.gz",
                "cifar-10-python.tar.gz",
                std::move(train),
                "test_batch"};
}

Layout cifar100_layout(bool coarse) {
  return Layout{coarse ? kCifar100Coarse : kCifar100Fine,
                "cifar-100-binary",
                "cifar-100-python",
                "cifar-100-binary.tar.gz",
                "cifar-100-python.tar.gz",
                {"train"},
                "test"};
}

std::string file_name(Format format, const std::string& batch) {
  return format == Format::Binary ? batch + ".bin" : batch;
}
// The batch's path inside the archive of `format`.
std::string member_name(const Layout& l, Format format, const std::string& batch) {
  return std::string(l.folder_of(format)) + "/" + file_name(format, batch);
}

// Where the data is: a folder of batch files of one format, or an archive (its format known
// from its name when found in a folder, else from its members).
struct Location {
  std::string path;
  bool archive = false;
  std::optional<Format> format;
};

Location locate(const Layout& l, const std::string& dir, const std::string& first_batch) {
  const std::string kind = file_kind(dir);
  // A file given directly is an archive; TarGzReader refuses one that is not a regular file.
  if (!kind.empty() && kind != "a directory") return {dir, true, std::nullopt};
  for (Format format : {Format::Binary, Format::Python}) {
    for (const std::string& folder : {dir, dir + "/" + l.folder_of(format)}) {
      if (file_exists(folder + "/" + file_name(format, first_batch))) {
        return {folder, false, format};
      }
    }
  }
  for (Format format : {Format::Binary, Format::Python}) {
    const std::string archive = dir + "/" + l.archive_of(format);
    if (file_exists(archive)) return {archive, true, format};
  }
  throw_invalid(
      fmt::format("{}: no {} data in {}{}: looked for {} (binary version) in it and "
                  "in {}/, {} (python version) in it and in {}/, and the archives {} and {}",
                  l.kind.name, l.kind.title, dir, kind.empty() ? " (it does not exist)" : "",
                  file_name(Format::Binary, first_batch), l.binary_folder,
                  file_name(Format::Python, first_batch), l.python_folder, l.binary_archive,
                  l.python_archive),
      fmt::format("download the {} binary or python version ({} or {}, "
                  "https://www.cs.toronto.edu/~kriz/cifar.html) and point the path at the folder "
                  "holding it or its unpacked folder, or at the .tar.gz itself",
                  l.kind.title, l.binary_archive, l.python_archive));
}

// Samples still wanted under `limit` (0: all).
int64_t still_wanted(const ImageDataset& ds, int64_t limit) {
  return limit > 0 ? limit - ds.size() : INT64_MAX;
}

// The whole of src, or at least max_bytes + 1 bytes when it holds more. Read in 1 MiB steps, so
// that a small file costs a small buffer (read_append's own growth step is 16 MiB).
std::vector<uint8_t> read_whole(ByteSource& src, size_t max_bytes) {
  constexpr size_t kStep = size_t(1) << 20;
  std::vector<uint8_t> bytes;
  while (bytes.size() <= max_bytes && src.read_append(bytes, kStep) == kStep) {
  }
  return bytes;
}

void read_binary_file(const Layout& l, const std::string& path, int64_t want, ImageDataset& ds) {
  ByteSource src(path);
  // At most one published batch: a gzip stream is never inflated past it (a small file can hold
  // gigabytes of zeros).
  const size_t most = l.kind.max_binary_bytes();
  const std::vector<uint8_t> bytes = read_whole(src, most);
  if (bytes.size() > most)
    throw_invalid(
        fmt::format("{}: {}larger than {} bytes, more than a {} binary batch "
                    "holds ({} records of {} bytes)",
                    path, src.compressed() ? "decompressed, " : "", most, l.kind.title,
                    l.kind.batch_images, l.kind.record_bytes()),
        fmt::format("point the path at the {} folder of {}", l.binary_folder, l.binary_archive));
  if (src.truncated() && !bytes.empty() && bytes.size() % size_t(l.kind.record_bytes()) == 0) {
    throw_invalid(fmt::format("{}: truncated data: the gzip stream ends before its trailer", path));
  }
  append_binary_batch(l.kind, bytes, path, want, ds, src.truncation_note());
}

void read_python_file(const Layout& l, const std::string& path, int64_t want, ImageDataset& ds) {
  ByteSource src(path);
  const size_t most = l.kind.max_python_bytes;
  const std::vector<uint8_t> bytes = read_whole(src, most);
  if (bytes.size() > most) {
    throw_invalid(
        fmt::format("{}: larger than {} bytes, more than a {} python batch holds", path, most,
                    l.kind.title),
        fmt::format("point the path at the {} folder of {}", l.python_folder, l.python_archive));
  }
  if (src.truncated()) {
    throw_invalid(fmt::format("{}: truncated data: the gzip stream ends before its trailer", path));
  }
  append_python_batch(l.kind, bytes, path, want, ds);
}

void read_folder(const Layout& l, const Location& at, const std::vector<std::string>& batches,
                 int64_t limit, ImageDataset& ds) {
  const Format format = *at.format;
  // Check every file exists before reading any: a missing fifth batch should not cost the
  // time of reading the first four.
  for (const std::string& batch : batches) {
    const std::string path = at.path + "/" + file_name(format, batch);
    if (!file_exists(path)) {
      const std::vector<std::string>& train = l.train_batches;
      throw_invalid(fmt::format("{}: file not found: {}", l.kind.name, path),
                    fmt::format("the {} {} version has {}{} and {}; unpack {} again", l.kind.title,
                                format == Format::Binary ? "binary" : "python",
                                file_name(format, train.front()),
                                train.size() > 1 ? " .. " + file_name(format, train.back()) : "",
                                file_name(format, l.test_batch), l.archive_of(format)));
    }
  }
  ds.source = batches.size() == 1
                  ? at.path + "/" + file_name(format, batches.front())
                  : fmt::format("{}/{} .. {}", at.path, file_name(format, batches.front()),
                                file_name(format, batches.back()));
  for (const std::string& batch : batches) {
    const int64_t want = still_wanted(ds, limit);
    if (want <= 0) break;
    const std::string path = at.path + "/" + file_name(format, batch);
    if (format == Format::Binary) {
      read_binary_file(l, path, want, ds);
    } else {
      read_python_file(l, path, want, ds);
    }
  }
}

// Which batch a member is, if any: its index in `batches` and its format. An archive found by
// name only holds its own format's members; one given directly takes either, fixed by the first
// batch member met.
std::optional<std::pair<size_t, Format>> match_member(const Layout& l, const std::string& member,
                                                      const std::vector<std::string>& batches,
                                                      std::optional<Format> format) {
  for (Format f : {Format::Binary, Format::Python}) {
    if (format && *format != f) continue;
    for (size_t i = 0; i < batches.size(); ++i) {
      if (member == member_name(l, f, batches[i])) return std::make_pair(i, f);
    }
  }
  return std::nullopt;
}

// Streams the archive's members, keeping each batch member met (bounded in size) until the
// batches before it have been decoded: the published archives list their members out of order,
// so a few batches may wait in memory. Stops as soon as `limit` samples are read; without a
// limit, reads to the archive's end.
void read_archive(const Layout& l, const Location& at, const std::vector<std::string>& batches,
                  int64_t limit, ImageDataset& ds) {
  std::optional<Format> format = at.format;
  std::vector<std::optional<std::vector<uint8_t>>> waiting(batches.size());
  size_t next = 0;  // the first batch not yet decoded
  TarGzReader tar(at.path);
  while (next < batches.size() && still_wanted(ds, limit) > 0 && tar.next()) {
    const auto match = match_member(l, tar.member(), batches, format);
    if (!match || waiting[match->first] || match->first < next) continue;
    format = match->second;
    waiting[match->first] = tar.read(l.max_bytes(*format));
    while (next < batches.size() && waiting[next] && still_wanted(ds, limit) > 0) {
      const std::string where =
          fmt::format("{}: member {}", at.path, member_name(l, *format, batches[next]));
      if (*format == Format::Binary) {
        append_binary_batch(l.kind, *waiting[next], where, still_wanted(ds, limit), ds);
      } else {
        append_python_batch(l.kind, *waiting[next], where, still_wanted(ds, limit), ds);
      }
      waiting[next].reset();
      ++next;
    }
  }
  if (next < batches.size() && still_wanted(ds, limit) > 0) {
    const std::string missing =
        format ? member_name(l, *format, batches[next])
               : fmt::format("{} or {}", member_name(l, Format::Binary, batches[next]),
                             member_name(l, Format::Python, batches[next]));
    throw_invalid(fmt::format("{}: the archive has no member {}", at.path, missing),
                  fmt::format("{}'s archives are {} and {}; download the archive again",
                              l.kind.title, l.binary_archive, l.python_archive));
  }
  // A whole split read: the rest of the archive too, so that its end (the gzip trailer's CRC,
  // nothing appended) is checked. A run with a sample limit stops early instead.
  if (limit <= 0)
    while (tar.next()) {
    }
  const Format f = format.value_or(Format::Binary);
  ds.source = fmt::format("{} ({}{})", at.path, member_name(l, f, batches.front()),
                          batches.size() == 1 ? "" : " .. " + file_name(f, batches.back()));
}

std::optional<DatasetShape> peek(const Layout& l, const std::string& path, Split split,
                                 int64_t limit) {
  try {
    const std::vector<std::string> batches = l.batch_names(split);
    const Location at = locate(l, path, batches.front());
    DatasetShape s;
    s.height = kSide;
    s.width = kSide;
    s.channels = kChannels;
    s.num_classes = l.kind.classes;
    if (!at.archive && *at.format == Format::Binary) {
      // Plain (not gzip-compressed) record files: their lengths count the records.
      int64_t records = 0;
      for (const std::string& batch : batches) {
        ByteSource src(at.path + "/" + file_name(Format::Binary, batch));
        std::error_code error;
        const auto bytes = std::filesystem::file_size(src.path(), error);
        if (src.compressed() || error) return s;
        records += int64_t(bytes) / l.kind.record_bytes();
      }
      s.size = limit > 0 ? std::min(limit, records) : records;
    }
    return s;
  } catch (const Error&) {
    return std::nullopt;  // load_cifar10 / load_cifar100 report it
  }
}

ImageDataset load(const Layout& l, const std::string& path, Split split, int64_t limit) {
  HG_CHECK(limit >= 0, "load_{}: limit must be >= 0 (0 keeps all samples), got {}", l.kind.name,
           limit);
  const std::vector<std::string> batches = l.batch_names(split);
  const Location at = locate(l, path, batches.front());
  ImageDataset ds = empty_dataset(l.kind);
  if (at.archive) {
    read_archive(l, at, batches, limit, ds);
  } else {
    read_folder(l, at, batches, limit, ds);
  }
  return ds;
}

}  // namespace

std::optional<DatasetShape> peek_cifar10(const std::string& path, Split split, int64_t limit) {
  return peek(cifar10_layout(), path, split, limit);
}

ImageDataset load_cifar10(const std::string& path, Split split, int64_t limit) {
  return load(cifar10_layout(), path, split, limit);
}

std::optional<DatasetShape> peek_cifar100(const std::string& path, Split split, int64_t limit,
                                          bool coarse) {
  return peek(cifar100_layout(coarse), path, split, limit);
}

ImageDataset load_cifar100(const std::string& path, Split split, int64_t limit, bool coarse) {
  return load(cifar100_layout(coarse), path, split, limit);
}

}  // namespace hg::data
