#include "hourglass/obs/metrics_jsonl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/obs/metrics_file_io.h"

namespace hg::obs {

namespace {

using detail::write_all;

}  // namespace

MetricsJsonl::MetricsJsonl(const std::string& path) : path_(path) {
  // Read-write only so that the last byte can be checked below; writes still append.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0) detail::throw_metrics_io(path, "open");
  // A run killed in the middle of a line leaves it unterminated; start on a fresh line so
  // that the records after it stay parseable (readers skip the one broken line).
  struct stat st {};
  char last = '\n';
  if (::fstat(fd_, &st) == 0 && st.st_size > 0 && ::pread(fd_, &last, 1, st.st_size - 1) == 1 &&
      last != '\n') {
    try {
      write_all(fd_, "\n", path_);
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
}

MetricsJsonl::~MetricsJsonl() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsJsonl::write(const std::vector<std::pair<std::string, double>>& numbers,
                         const std::vector<std::pair<std::string, std::string>>& text) {
  nlohmann::ordered_json record = nlohmann::ordered_json::object();
  for (const auto& [name, value] : numbers) {
    if (!std::isfinite(value))
      record[name] = nullptr;
    else if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0)  // 2^53
      record[name] = int64_t(value);
    else
      record[name] = value;
  }
  for (const auto& [name, value] : text) record[name] = value;
  // Invalid UTF-8 in a text field is replaced rather than failing the run over a log line.
  std::string line = record.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  line += '\n';
  // One write() per line: with O_APPEND the line lands whole at the end of the file.
  write_all(fd_, line, path_);
}

void MetricsJsonl::drop_lines_after(const std::string& path, const std::string& field,
                                    double max_value) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  const std::string text = read_file_bytes(path, kRecordFileCap);
  std::stringstream in(text);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains(field) || !record[field].is_number() ||
        !(record[field].get<double>() <= max_value))
      continue;
    kept += line + "\n";
  }
  if (kept != text) write_file_atomic(path, kept);
}

}  // namespace hg::obs
