// Sequential reading of a dataset file that may be plain or gzip-compressed. The format is
// detected from the first two bytes (1f 8b), not the name, so a renamed file still reads.
// Every failure is an InvalidInput Error naming the file: the readers' callers can only fix
// it by fixing the file or the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hg::data {

// Whether anything (a file, a folder, a FIFO, ...) exists at `path`: readers pick their files
// with it, and ByteSource then refuses a path that is not a regular file, saying what it is.
bool file_exists(const std::string& path);

class ByteSource {
 public:
  // Opens `path`; a missing or unreadable file, or one that is not a regular file (a folder,
  // a FIFO, a device: checked with stat() before opening, which could block), is an
  // InvalidInput error naming it.
  explicit ByteSource(const std::string& path);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Reads up to `bytes` bytes; fewer only at the end of the data. A corrupt gzip stream is
  // an error; a gzip stream cut short just ends early (truncated() then says so), so the
  // caller can report how much of its record it found.
  size_t read(void* out, size_t bytes);
  // Reads `bytes` bytes into out, appending to it in chunks so that a header claiming far
  // more data than the file holds never makes us allocate the claimed size up front.
  // Returns the number appended (less than `bytes` at the end of the data).
  size_t read_append(std::vector<uint8_t>& out, size_t bytes);
  // Whether any data is left (consumes nothing visible).
  bool at_end();

  const std::string& path() const { return path_; }
  bool compressed() const { return gz_ != nullptr; }
  // True once a gzip stream has ended before its trailer (a cut-short .gz file).
  bool truncated() const { return truncated_; }
  // " (the gzip stream ends early)" when truncated, else "": appended to truncation messages.
  std::string truncation_note() const;

 private:
  std::string path_;
  void* gz_ = nullptr;    // gzFile when compressed
  void* file_ = nullptr;  // FILE* when plain
  bool truncated_ = false;
  int peeked_ = -1;  // one byte read ahead by at_end(), or -1
};

}  // namespace hg::data
