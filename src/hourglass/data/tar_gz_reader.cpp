#include "hourglass/data/tar_gz_reader.h"

#include <archive.h>
#include <archive_entry.h>

#include <cerrno>
#include <exception>

#include <algorithm>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/data/byte_source.h"

namespace hg::data {

namespace {

constexpr size_t kReadBlock = size_t(1) << 16;  // decompressed bytes handed to libarchive
constexpr size_t kDataChunk = size_t(1) << 20;  // growth step of a member's buffer

}  // namespace

void TarGzReader::Free::operator()(archive* a) const { archive_read_free(a); }

struct TarGzReader::Feed {
  explicit Feed(const std::string& path) : source(path), block(kReadBlock) {}
  // The next decompressed block into `block`: its size, 0 at the end. A stream cut short is
  // refused: nothing vouches for its last bytes (the trailer's CRC never came).
  size_t next_block() {
    const size_t got = source.read(block.data(), block.size());
    if (source.truncated())
      throw_invalid(
          fmt::format("{}: truncated data: the gzip stream ends before its trailer", source.path()),
          "the archive is cut short; download it again");
    return got;
  }
  ByteSource source;
  std::vector<uint8_t> block;
  std::exception_ptr error;
};

void TarGzReader::FreeFeed::operator()(Feed* f) const { delete f; }

namespace {

// libarchive's read callback: the next decompressed block. No exception may cross libarchive's
// C frames: one is kept in the feed and rethrown by TarGzReader::fail.
la_ssize_t read_block(archive* a, void* feed, const void** buffer) {
  auto* f = static_cast<TarGzReader::Feed*>(feed);
  try {
    *buffer = f->block.data();
    return la_ssize_t(f->next_block());
  } catch (...) {
    f->error = std::current_exception();
    archive_set_error(a, EIO, "read failed");
    return -1;
  }
}

}  // namespace

TarGzReader::TarGzReader(const std::string& path) : path_(path) {
  require_regular_file(path, "archive");
  feed_.reset(new Feed(path));
  archive_.reset(archive_read_new());
  if (archive_ == nullptr) throw_runtime(fmt::format("{}: libarchive: out of memory", path));
  archive_read_support_format_tar(archive_.get());
  if (archive_read_open(archive_.get(), feed_.get(), nullptr, read_block, nullptr) != ARCHIVE_OK)
    fail("");
}

void TarGzReader::fail(const std::string& what) const {
  if (feed_ != nullptr && feed_->error != nullptr)
    std::rethrow_exception(feed_->error);  // ByteSource's own message
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
      // The rest of the file: tar padding, then the gzip trailer, then nothing.
      size_t tail = 0;
      while (tail <= kMaxTailBytes) {
        const size_t got = feed_->next_block();
        if (got == 0) break;
        tail += got;
      }
      if (tail > kMaxTailBytes)
        fail(fmt::format("more than {} bytes after the archive's end marker", kMaxTailBytes));
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
