#include "hourglass/data/byte_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"

namespace hg::data {

namespace {

// zlib's gzread takes an unsigned int length; stay well below it.
constexpr size_t kMaxChunk = size_t(1) << 30;
// Growth step of read_append: bounds what a lying header can make us allocate ahead of data.
constexpr size_t kAppendChunk = size_t(16) << 20;

gzFile as_gz(void* p) { return static_cast<gzFile>(p); }
std::FILE* as_file(void* p) { return static_cast<std::FILE*>(p); }

}  // namespace

bool file_exists(const std::string& path) { return !file_kind(path).empty(); }

ByteSource::ByteSource(const std::string& path) : path_(path) {
  // Before fopen: opening a FIFO blocks until a writer appears, which may be never.
  require_regular_file(path, "data file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) throw_invalid(fmt::format("{}: file not found", path));
    throw_invalid(fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  const bool gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (!gzip) {
    std::rewind(f);
    file_ = f;
    return;
  }
  std::fclose(f);
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    throw_invalid(fmt::format("{}: cannot open gzip file: {}", path, std::strerror(errno)));
  }
  gzbuffer(gz, 1 << 17);  // larger than the 8 KiB default: fewer, bigger reads
  gz_ = gz;
}

ByteSource::~ByteSource() {
  if (gz_ != nullptr) gzclose(as_gz(gz_));
  if (file_ != nullptr) std::fclose(as_file(file_));
}

size_t ByteSource::read(void* out, size_t bytes) {
  auto* dst = static_cast<unsigned char*>(out);
  size_t done = 0;
  if (bytes > 0 && peeked_ >= 0) {
    dst[done++] = static_cast<unsigned char>(peeked_);
    peeked_ = -1;
  }
  while (done < bytes) {
    const size_t want = std::min(bytes - done, kMaxChunk);
    size_t got = 0;
    if (gz_ != nullptr) {
      const int n = gzread(as_gz(gz_), dst + done, unsigned(want));
      int errnum = Z_OK;
      const char* msg = gzerror(as_gz(gz_), &errnum);
      if (n < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) {
        throw_invalid(fmt::format("{}: corrupt gzip data: {}", path_, msg ? msg : "unknown"));
      }
      // Z_BUF_ERROR: the compressed stream ended before its trailer (a cut-short download).
      if (errnum == Z_BUF_ERROR) truncated_ = true;
      got = size_t(n);
    } else {
      got = std::fread(dst + done, 1, want, as_file(file_));
      if (got < want && std::ferror(as_file(file_))) {
        throw_invalid(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
      }
    }
    done += got;
    if (got < want) break;  // end of data
  }
  return done;
}

size_t ByteSource::read_append(std::vector<uint8_t>& out, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    const size_t step = std::min(bytes - done, kAppendChunk);
    const size_t old = out.size();
    out.resize(old + step);
    const size_t got = read(out.data() + old, step);
    out.resize(old + got);
    done += got;
    if (got < step) break;
  }
  return done;
}

bool ByteSource::at_end() {
  if (peeked_ >= 0) return false;
  unsigned char byte = 0;
  if (read(&byte, 1) == 0) return true;
  peeked_ = byte;
  return false;
}

std::string ByteSource::truncation_note() const {
  return truncated_ ? " (the gzip stream ends early)" : "";
}

}  // namespace hg::data
