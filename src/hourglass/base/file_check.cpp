#include "hourglass/base/file_check.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "hourglass/base/error.h"

namespace hg {

namespace {

// What (l)stat says `path` is; "" when it does not exist.
std::string kind_of(const std::string& path, bool follow_links) {
  struct stat st {};
  if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return "";
    throw_invalid(fmt::format("{}: cannot inspect: {}", path, std::strerror(err)),
                  "check the path and its folders' permissions");
  }
  if (S_ISREG(st.st_mode)) return "a regular file";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string file_kind(const std::string& path) { return kind_of(path, true); }

void require_replaceable(const std::string& path) {
  const std::string kind = kind_of(path, false);
  if (!kind.empty() && kind != "a regular file")
    throw_invalid(fmt::format("{} is {}: hourglass writes a file there by renaming a new one over "
                              "it and replaces only regular files",
                              path, kind),
                  "remove it, or write to another path");
}

void require_regular_file(const std::string& path, const std::string& what) {
  const std::string kind = file_kind(path);
  if (kind.empty()) throw_invalid(fmt::format("{}: {} not found", path, what), "check the path");
  if (kind != "a regular file")
    throw_invalid(fmt::format("{}: is {}, expected a {} (a regular file)", path, kind, what),
                  fmt::format("point the path at the {} itself", what));
}

}  // namespace hg
