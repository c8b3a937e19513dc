#include "hourglass/data/tar_gz_reader.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"

namespace hg::data {

namespace {

constexpr size_t kReadBlock = size_t(1) << 16;  // libarchive's read size from the file
constexpr size_t kDataChunk = size_t(1) << 20;  // growth step of a member's buffer

}  // namespace

void TarGzReader::Free::operator()(archive* a) const { archive_read_free(a); }

TarGzReader::TarGzReader(const std::string& path) : path_(path) {
  require_regular_file(path, "archive");
  archive_.reset(archive_read_new());
  if (archive_ == nullptr) throw_runtime(fmt::format("{}: libarchive: out of memory", path));
  archive_read_support_filter_gzip(archive_.get());
  archive_read_support_format_tar(archive_.get());
  if (archive_read_open_filename(archive_.get(), path.c_str(), kReadBlock) != ARCHIVE_OK) {
    fail("");
  }
}

void TarGzReader::fail(const std::string& what) const {
  const char* why = archive_ != nullptr ? archive_error_string(archive_.get()) : nullptr;
  const std::string member = member_.empty() ? "" : ": member " + member_;
  throw_invalid(fmt::format("{}{}: {}", path_, member,
                            what.empty() ? std::string("not a readable .tar.gz archive: ") +
                                               (why != nullptr ? why : "unknown error")
                                         : what),
                "the archive is damaged or cut short; download it again");
}

bool TarGzReader::next() {
  while (true) {
    archive_entry* entry = nullptr;
    const int status = archive_read_next_header(archive_.get(), &entry);
    if (status == ARCHIVE_EOF) {
      member_.clear();
      return false;
    }
    // ARCHIVE_WARN (an odd header field) still gives a usable entry; FATAL/RETRY do not.
    if (status != ARCHIVE_OK && status != ARCHIVE_WARN) fail("");
    const char* name = archive_entry_pathname(entry);
    member_ = name != nullptr ? name : "";
    if (member_.rfind("./", 0) == 0) member_.erase(0, 2);
    if (archive_entry_filetype(entry) == AE_IFREG) return true;
  }
}

std::vector<uint8_t> TarGzReader::read(size_t max_bytes) {
  std::vector<uint8_t> out;
  while (true) {
    const size_t step = std::min(kDataChunk, max_bytes + 1 - out.size());
    const size_t old = out.size();
    out.resize(old + step);
    const la_ssize_t got = archive_read_data(archive_.get(), out.data() + old, step);
    if (got < 0) {
      const char* why = archive_error_string(archive_.get());
      fail(fmt::format("cannot read the member: {}", why != nullptr ? why : "unknown error"));
    }
    out.resize(old + size_t(got));
    if (out.size() > max_bytes) {
      fail(fmt::format("member larger than {} bytes, more than this file can hold", max_bytes));
    }
    if (got == 0) return out;
  }
}

}  // namespace hg::data
