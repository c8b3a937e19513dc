// Small files that must survive a crash (the budget ledger): atomic replacement, a backup of
// the version being replaced, and an advisory lock so that several processes can update one
// file in turn.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hg {

// Replaces `path` with `bytes` so that a crash at any moment leaves either the old file or the
// new one, never a mix: the bytes go to "<path>.tmp.<pid>", which is fsynced, renamed over
// `path`, and then the directory is fsynced so the rename itself is durable. When
// `backup_path` is not empty and `path` exists, the old version is kept there first (as a hard
// link where the file system allows, else a copy). Throws Runtime naming the path, the step
// and the system error; the temporary file is removed on failure.
void write_file_atomic(const std::string& path, std::string_view bytes,
                       const std::string& backup_path = {});

// The most bytes read_file_bytes reads unless told otherwise: far above any ledger, index,
// config or metrics file hourglass writes, far below what would exhaust a machine's memory.
inline constexpr size_t kReadFileCap = size_t(256) << 20;
// The cap for the record files a run appends to (steps.jsonl, steps.csv), which grow with the
// run: a per-step record of a ten-million-step run stays below it.
inline constexpr size_t kRecordFileCap = size_t(4) << 30;

// The whole file as bytes. Throws InvalidInput naming the path when it is not a regular file
// (checked before opening: a FIFO is never opened) or holds more than `cap` bytes, and Runtime
// when it cannot be read.
std::string read_file_bytes(const std::string& path, size_t cap = kReadFileCap);

// An exclusive advisory lock (flock) on "<path>.lock", held for the object's lifetime. The
// lock lives on a separate file because `path` itself is replaced by rename, and a lock on a
// replaced inode protects nothing. Blocks until the lock is free. Throws Runtime naming the
// lock file when it cannot be created or locked.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace hg
