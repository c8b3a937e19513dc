// Reading the members of a .tar.gz archive in place, one after another: the gzip stream is
// decompressed by ByteSource (strictly: bytes after it that start no member are refused) and
// libarchive reads the tar format from it (only the tar format is enabled: nothing else is
// parsed). Members are
// streamed: the archive is never unpacked to disk, and a member is read into memory only when
// asked, up to a bound the caller gives. Every fault (not a regular file, not a tar.gz, a
// corrupt or cut-short stream, a member over its bound) is an InvalidInput error naming the
// archive, and the member when there is one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct archive;

namespace hg::data {

class TarGzReader {
 public:
  // Opens `path`, which must be a regular file (checked before opening: a FIFO would block).
  explicit TarGzReader(const std::string& path);
  TarGzReader(const TarGzReader&) = delete;
  TarGzReader& operator=(const TarGzReader&) = delete;

  // Moves to the next regular-file member (folders, links and the like are skipped); false at
  // the end of the archive, once the rest of the file has been read and checked (the tar
  // blocks after the end marker, at most kMaxTailBytes, and the gzip trailer). The current
  // member's data, if unread, is skipped.
  bool next();
  // The current member's path inside the archive, with a leading "./" removed.
  const std::string& member() const { return member_; }
  // Reads the current member whole. One larger than `max_bytes` is an error, found while
  // reading (the header's size is not trusted): at most max_bytes + 1 bytes are ever held.
  std::vector<uint8_t> read(size_t max_bytes);

  const std::string& path() const { return path_; }

  // Decompressed bytes allowed after the tar end marker (tar pads to its record size, 10 KiB by
  // default): more is refused, so a small file cannot make the end check inflate gigabytes.
  static constexpr size_t kMaxTailBytes = size_t(1) << 20;

  // The decompressed bytes libarchive reads (tar_gz_reader.cpp): a ByteSource, the block it
  // reads into, and an error it raised, rethrown once libarchive has returned.
  struct Feed;

 private:
  // InvalidInput naming the archive and member: `what`, or libarchive's error when empty.
  [[noreturn]] void fail(const std::string& what) const;

  // archive_read_free through a unique_ptr: freed also when the constructor throws.
  struct Free {
    void operator()(archive* a) const;
  };
  std::string path_;
  std::string member_;
  struct FreeFeed {
    void operator()(Feed* f) const;
  };
  std::unique_ptr<Feed, FreeFeed> feed_;
  std::unique_ptr<archive, Free> archive_;  // after feed_: freed first, while feed_ exists
};

}  // namespace hg::data
