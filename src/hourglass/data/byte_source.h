// Sequential reading of a dataset file that may be plain or gzip-compressed. The format is
// detected from the first two bytes (1f 8b), not the name, so a renamed file still reads.
// Every failure is an InvalidInput Error naming the file: the readers' callers can only fix
// it by fixing the file or the path. A gzip file is one member or several (as `cat a.gz b.gz`
// makes); bytes after the last member that do not start another are an error, as are a
// corrupt stream and a failed CRC or length check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

  // Reads up to `bytes` bytes; fewer only at the end of the data. A corrupt gzip stream, or
  // bytes after it that start no further member, is an error; a gzip stream cut short just
  // ends early (truncated() then says so), so the caller can report how much of its record it
  // found.
  size_t read(void* out, size_t bytes);
  // Reads `bytes` bytes into out, appending to it in chunks so that a header claiming far
  // more data than the file holds never makes us allocate the claimed size up front.
  // Returns the number appended (less than `bytes` at the end of the data).
  size_t read_append(std::vector<uint8_t>& out, size_t bytes);
  // Whether any data is left (consumes nothing visible).
  bool at_end();

  const std::string& path() const { return path_; }
  bool compressed() const { return inflater_ != nullptr; }
  // True once a gzip stream has ended before its trailer (a cut-short .gz file).
  bool truncated() const { return truncated_; }
  // " (the gzip stream ends early)" when truncated, else "": appended to truncation messages.
  std::string truncation_note() const;

 private:
  // zlib's inflate over the file's bytes (byte_source.cpp), when compressed.
  struct Inflater;
  struct FreeInflater {
    void operator()(Inflater* p) const;
  };
  // Up to `want` decompressed bytes into dst; fewer only at the end of the data.
  size_t inflate_some(unsigned char* dst, size_t want);
  // Compacts the unread input and reads the file until at least `bytes` are buffered or it
  // ends; the number buffered.
  size_t buffer_input(size_t bytes);

  std::string path_;
  void* file_ = nullptr;  // FILE*
  std::unique_ptr<Inflater, FreeInflater> inflater_;
  bool truncated_ = false;
  int peeked_ = -1;  // one byte read ahead by at_end(), or -1
};

}  // namespace hg::data
