#include "hourglass/base/file_check.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "hourglass/base/error.h"

namespace hg {

std::string file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return "";
    throw_invalid(fmt::format("{}: cannot inspect: {}", path, std::strerror(err)),
                  "check the path and its folders' permissions");
  }
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

void require_regular_file(const std::string& path, const std::string& what) {
  const std::string kind = file_kind(path);
  if (kind.empty()) throw_invalid(fmt::format("{}: {} not found", path, what), "check the path");
  if (kind != "a regular file")
    throw_invalid(fmt::format("{}: is {}, expected a {} (a regular file)", path, kind, what),
                  fmt::format("point the path at the {} itself", what));
}

}  // namespace hg
