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

}  // namespace hg
