#include "hourglass/obs/metrics_csv.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/obs/metrics_file_io.h"

namespace hg::obs {

namespace {

using detail::write_all;

std::vector<std::string> split_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

std::string header_line(const std::vector<std::string>& columns) {
  std::string line;
  for (const std::string& name : columns) {
    HG_ASSERT(name.find_first_of(",\"\r\n") == std::string::npos,
              "metrics column name '{}' holds a comma, quote or line break", name);
    line += line.empty() ? name : "," + name;
  }
  return line + "\n";
}

std::string row_line(const std::vector<std::string>& columns,
                     const std::vector<std::pair<std::string, double>>& record) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) line += ',';
    for (const auto& [name, value] : record)
      if (name == columns[i]) {
        line += csv_number(value);
        break;
      }
  }
  return line + "\n";
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, double>>& record) {
  std::vector<std::string> names;
  for (const auto& [name, value] : record) names.push_back(name);
  return names;
}

}  // namespace

std::string csv_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0)  // 2^53
    return std::to_string(int64_t(value));
  return fmt::format("{}", value);  // shortest text that reads back to the same double
}

MetricsCsv::MetricsCsv(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0) detail::throw_metrics_io(path, "open");
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) detail::throw_metrics_io(path, "inspect");
    if (st.st_size > 0) {
      // The header fixes the columns of every row appended to this file.
      std::string header;
      char buffer[4096];
      for (off_t at = 0; header.find('\n') == std::string::npos;) {
        const ssize_t n = ::pread(fd_, buffer, sizeof buffer, at);
        if (n < 0) detail::throw_metrics_io(path, "read");
        if (n == 0) break;
        header.append(buffer, size_t(n));
        at += n;
      }
      header = header.substr(0, header.find('\n'));
      if (!header.empty() && header.back() == '\r') header.pop_back();
      columns_ = split_cells(header);
      char last = '\n';
      if (::pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n') write_all(fd_, "\n", path_);
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

MetricsCsv::~MetricsCsv() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsCsv::write(const std::vector<std::pair<std::string, double>>& record) {
  std::string text;
  if (columns_.empty()) {
    columns_ = names_of(record);
    text = header_line(columns_);
  }
  text += row_line(columns_, record);
  // One write() for the row (and the header before the first): it lands whole at the end.
  write_all(fd_, text, path_);
}

void MetricsCsv::write_file(
    const std::string& path,
    const std::vector<std::vector<std::pair<std::string, double>>>& records) {
  std::string text;
  if (!records.empty()) {
    const std::vector<std::string> columns = names_of(records.front());
    text = header_line(columns);
    for (const auto& record : records) text += row_line(columns, record);
  }
  write_file_atomic(path, text);
}

void MetricsCsv::drop_rows_after(const std::string& path, double max_first) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  const std::string text = read_file_bytes(path, kRecordFileCap);
  std::stringstream in(text);
  std::string kept, line;
  size_t columns = 0;
  for (bool first = true; std::getline(in, line); first = false) {
    if (first) {
      columns = split_cells(line).size();
      kept += line + "\n";
      continue;
    }
    const std::vector<std::string> cells = split_cells(line);
    if (cells.size() != columns || cells.empty() || cells[0].empty()) continue;
    char* end = nullptr;
    const double v = std::strtod(cells[0].c_str(), &end);
    if (*end != '\0' || !(v <= max_first)) continue;
    kept += line + "\n";
  }
  if (kept != text) write_file_atomic(path, kept);
}

}  // namespace hg::obs
