#include "hourglass/obs/metrics_file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hourglass/base/error.h"

namespace hg::obs::detail {

void throw_metrics_io(const std::string& path, const char* what) {
  throw_runtime(fmt::format("cannot {} metrics file {}: {}", what, path, std::strerror(errno)),
                "check that the run directory exists, is writable and has free space");
}

void write_all(int fd, const std::string& text, const std::string& path) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_metrics_io(path, "write");
    }
    p += n;
    left -= size_t(n);
  }
}

}  // namespace hg::obs::detail
