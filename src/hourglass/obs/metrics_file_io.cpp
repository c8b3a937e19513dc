#include "hourglass/obs/metrics_file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hourglass/base/error.h"
#include "hourglass/base/write_fully.h"

namespace hg::obs::detail {

void throw_metrics_io(const std::string& path, const char* what) {
  throw_runtime(fmt::format("cannot {} metrics file {}: {}", what, path, std::strerror(errno)),
                "check that the run directory exists, is writable and has free space");
}

void write_all(int fd, const std::string& text, const std::string& path) {
  if (!write_fully(fd, text.data(), text.size())) throw_metrics_io(path, "write");
}

}  // namespace hg::obs::detail
