#include "hourglass/base/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/write_fully.h"

namespace hg {

namespace {

std::string sys_error() { return std::strerror(errno); }

[[noreturn]] void write_failed(const std::string& path, const std::string& step) {
  throw_runtime(fmt::format("cannot write {}: {} failed: {}", path, step, sys_error()),
                "check that the directory exists, is writable and the disk is not full");
}

// Closes the descriptor on every path out of a function.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  bool close() {
    const int f = fd;
    fd = -1;
    return ::close(f) == 0;
  }
};

// Removes the temporary file unless it was renamed into place.
struct TempFile {
  std::string path;
  bool committed = false;
  ~TempFile() {
    if (!committed) ::unlink(path.c_str());
  }
};

std::string directory_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  if (!write_fully(fd, bytes.data(), bytes.size())) write_failed(path, "write");
}

// Writes `bytes` to the temporary file `temp.path` (next to `path`) and fsyncs it.
void write_temp(TempFile& temp, std::string_view bytes, const std::string& path) {
  Fd fd(::open(temp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.fd < 0) write_failed(path, fmt::format("creating {}", temp.path));
  write_all(fd.fd, bytes, path);
  if (::fsync(fd.fd) != 0) write_failed(path, "fsync");
  if (!fd.close()) write_failed(path, "close");
}

// Keeps the current `path` as `backup`. A hard link costs nothing and shares the old inode,
// which the coming rename leaves untouched; where links are not supported, copy.
void keep_backup(const std::string& path, const std::string& backup) {
  const std::string temp_link = fmt::format("{}.tmp.{}", backup, ::getpid());
  ::unlink(temp_link.c_str());
  if (::link(path.c_str(), temp_link.c_str()) == 0) {
    if (::rename(temp_link.c_str(), backup.c_str()) != 0) {
      ::unlink(temp_link.c_str());
      write_failed(backup, fmt::format("renaming {} over it", temp_link));
    }
    return;
  }
  TempFile temp{temp_link};
  write_temp(temp, read_file_bytes(path), backup);
  if (::rename(temp.path.c_str(), backup.c_str()) != 0)
    write_failed(backup, fmt::format("renaming {} over it", temp.path));
  temp.committed = true;
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view bytes,
                       const std::string& backup_path) {
  require_replaceable(path);
  TempFile temp{fmt::format("{}.tmp.{}", path, ::getpid())};
  write_temp(temp, bytes, path);
  if (!backup_path.empty() && ::access(path.c_str(), F_OK) == 0) keep_backup(path, backup_path);
  if (::rename(temp.path.c_str(), path.c_str()) != 0)
    write_failed(path, fmt::format("renaming {} over it", temp.path));
  temp.committed = true;
  // Without this the rename may be lost on power failure even though the data was synced.
  const std::string dir = directory_of(path);
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.fd < 0 || ::fsync(dir_fd.fd) != 0)
    throw_runtime(fmt::format("{} was written but syncing its directory {} failed: {}", path, dir,
                              sys_error()),
                  "the file may not survive a power loss; check the file system");
}

std::string read_file_bytes(const std::string& path, size_t cap) {
  // Checked before opening (reading a FIFO waits for a writer, perhaps forever) and before
  // reading (a file of any size would be read whole).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw_invalid(fmt::format("{} is {}, not a regular file", path, file_kind(path)),
                    "point the path at a regular file");
    if (size_t(st.st_size) > cap)
      throw_invalid(fmt::format("{} holds {} bytes, more than the {} bytes a file of its kind may",
                                path, st.st_size, cap),
                    "check that the path names the right file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw_runtime(fmt::format("cannot read {}: {}", path, sys_error()),
                  "check that the file exists and is readable");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw_runtime(fmt::format("cannot read {}: {}", path, sys_error()));
  return s.str();
}

FileLock::FileLock(const std::string& path) {
  const std::string lock_path = path + ".lock";
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw_runtime(fmt::format("cannot create lock file {}: {}", lock_path, sys_error()),
                  "check that the directory exists and is writable");
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const std::string why = sys_error();
    ::close(fd_);
    fd_ = -1;
    throw_runtime(fmt::format("cannot lock {}: {}", lock_path, why),
                  "the file system may not support flock; keep the file on a local disk");
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace hg
