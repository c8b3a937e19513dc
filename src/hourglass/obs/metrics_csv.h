// Metrics as CSV: a header line naming the columns, then one row per record, appended and
// handed to the kernel as each row is written (like metrics_jsonl.h), for spreadsheets and
// pandas.read_csv.
//
// A file's columns are fixed by its header: the names of the first record written to it (or,
// for a file that already has lines, its first line). A later record is written in the header's
// order; a column the record lacks is an empty cell, and a name the header lacks is left out,
// so a record with a new field never shifts the columns of the rows after it. Numbers are
// written like MetricsJsonl's: integral values as integers, others in the shortest form that
// reads back to the same double; NaN and infinities as nan, inf, -inf.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hg::obs {

class MetricsCsv {
 public:
  // Opens (creating if needed) `path` for appending; the directory must exist. A file whose
  // last row was cut short (a killed run) gets its line ended first. Throws Runtime naming the
  // path and the system error.
  explicit MetricsCsv(const std::string& path);
  ~MetricsCsv();
  MetricsCsv(const MetricsCsv&) = delete;
  MetricsCsv& operator=(const MetricsCsv&) = delete;

  // Appends one row (and the header first, when the file has none). Names must not hold
  // commas, quotes or line breaks. Throws Runtime naming the path on a write failure.
  void write(const std::vector<std::pair<std::string, double>>& record);

  const std::vector<std::string>& columns() const { return columns_; }
  const std::string& path() const { return path_; }

  // Replaces `path` (atomically) with the header of the first record and a row per record.
  static void write_file(const std::string& path,
                         const std::vector<std::vector<std::pair<std::string, double>>>& records);
  // Rewrites `path` (when it exists and something changes; atomically) without the rows whose
  // first cell is a number above `max_first` or is not a number (a row cut short), keeping the
  // header: the steps a resumed run trains again. Throws Runtime naming the file.
  static void drop_rows_after(const std::string& path, double max_first);

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> columns_;
};

// One number as MetricsCsv writes it.
std::string csv_number(double value);

}  // namespace hg::obs
