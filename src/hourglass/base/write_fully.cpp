#include "hourglass/base/write_fully.h"

#include <unistd.h>

#include <cerrno>

namespace hg {

bool write_fully(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    bytes -= size_t(n);
  }
  return true;
}

int64_t pread_fully(int fd, void* data, size_t bytes, uint64_t offset) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, p + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += size_t(n);
  }
  return int64_t(done);
}

}  // namespace hg
