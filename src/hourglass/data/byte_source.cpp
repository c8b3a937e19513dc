#include "hourglass/data/byte_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"

namespace hg::data {

namespace {

// zlib counts in unsigned int; stay well below it.
constexpr size_t kMaxChunk = size_t(1) << 30;
// Growth step of read_append: bounds what a lying header can make us allocate ahead of data.
constexpr size_t kAppendChunk = size_t(16) << 20;
// Compressed bytes read from the file at a time.
constexpr size_t kInputBlock = size_t(1) << 17;

std::FILE* as_file(void* p) { return static_cast<std::FILE*>(p); }

}  // namespace

struct ByteSource::Inflater {
  z_stream zs{};
  std::vector<unsigned char> in = std::vector<unsigned char>(kInputBlock);
  uint64_t consumed = 0;  // compressed bytes of the file inflate has taken
  bool ended = false;     // past the last member (or cut short)
};

void ByteSource::FreeInflater::operator()(Inflater* p) const {
  inflateEnd(&p->zs);
  delete p;
}

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
  file_ = f;
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::rewind(f);
  if (got != 2 || magic[0] != 0x1f || magic[1] != 0x8b) return;
  std::unique_ptr<Inflater, FreeInflater> z(new Inflater);
  // 15 + 16: a gzip header and trailer around a deflate stream with a 32 KiB window.
  if (inflateInit2(&z->zs, 15 + 16) != Z_OK) {
    delete z.release();  // inflateEnd needs a successful init
    std::fclose(f);
    file_ = nullptr;
    throw_runtime(fmt::format("{}: zlib: cannot start decompressing", path));
  }
  inflater_ = std::move(z);
}

ByteSource::~ByteSource() {
  if (file_ != nullptr) std::fclose(as_file(file_));
}

size_t ByteSource::buffer_input(size_t bytes) {
  Inflater& z = *inflater_;
  if (z.zs.avail_in > 0 && z.zs.next_in != z.in.data())
    std::memmove(z.in.data(), z.zs.next_in, z.zs.avail_in);
  z.zs.next_in = z.in.data();
  while (z.zs.avail_in < bytes) {
    const size_t got =
        std::fread(z.in.data() + z.zs.avail_in, 1, z.in.size() - z.zs.avail_in, as_file(file_));
    if (got == 0) {
      if (std::ferror(as_file(file_)))
        throw_invalid(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
      break;
    }
    z.zs.avail_in += unsigned(got);
  }
  return z.zs.avail_in;
}

size_t ByteSource::inflate_some(unsigned char* dst, size_t want) {
  Inflater& z = *inflater_;
  size_t done = 0;
  while (done < want && !z.ended) {
    if (z.zs.avail_in == 0 && buffer_input(1) == 0) {
      // The file ended inside a member: a cut-short download.
      truncated_ = true;
      z.ended = true;
      break;
    }
    z.zs.next_out = dst + done;
    z.zs.avail_out = unsigned(want - done);
    const unsigned before_in = z.zs.avail_in;
    const int status = inflate(&z.zs, Z_NO_FLUSH);
    done = want - z.zs.avail_out;
    z.consumed += before_in - z.zs.avail_in;
    if (status == Z_STREAM_END) {
      // Another member may follow (gzip allows concatenation); anything else is not data.
      const size_t left = buffer_input(2);
      if (left == 0) {
        z.ended = true;
      } else if (left >= 2 && z.zs.next_in[0] == 0x1f && z.zs.next_in[1] == 0x8b) {
        inflateReset(&z.zs);
      } else {
        std::fseek(as_file(file_), 0, SEEK_END);
        const long size = std::ftell(as_file(file_));
        throw_invalid(
            fmt::format("{}: {} bytes after the end of the gzip data (at byte {}) that start no "
                        "further gzip member",
                        path_, size > 0 ? uint64_t(size) - z.consumed : uint64_t(left), z.consumed),
            "the file is damaged or has something appended; download it again");
      }
    } else if (status == Z_BUF_ERROR) {
      // No progress without more input: the next pass reads it, or finds the file's end.
      if (z.zs.avail_in > 0 && z.zs.avail_out > 0)
        throw_invalid(fmt::format("{}: corrupt gzip data", path_));
    } else if (status != Z_OK) {
      throw_invalid(fmt::format("{}: corrupt gzip data: {}", path_,
                                z.zs.msg != nullptr ? z.zs.msg : zError(status)),
                    "the file is damaged; download it again");
    }
  }
  return done;
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
    if (inflater_ != nullptr) {
      got = inflate_some(dst + done, want);
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
