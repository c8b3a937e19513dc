// Metrics as JSON Lines: one JSON object per line, appended and handed to the kernel as each
// line is written, so `tail -f` and plotting scripts see progress live and a crash loses at
// most the line being written. The file is opened in append mode: a resumed run keeps the
// history of the interrupted one.
//
// The JSON library is linked privately, so records are passed as plain name/value pairs.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hg::obs {

class MetricsJsonl {
 public:
  // Opens (creating if needed) `path` for appending; the directory must exist. Throws Runtime
  // naming the path and the system error.
  explicit MetricsJsonl(const std::string& path);
  ~MetricsJsonl();
  MetricsJsonl(const MetricsJsonl&) = delete;
  MetricsJsonl& operator=(const MetricsJsonl&) = delete;

  // Appends {"name": value, ...}: the numbers in order, then the text fields. Integral numbers
  // (below 2^53) are written as JSON integers ("epoch": 3, not 3.0); NaN and infinities,
  // which JSON cannot represent, as null. Throws Runtime naming the path on a write failure.
  void write(const std::vector<std::pair<std::string, double>>& numbers,
             const std::vector<std::pair<std::string, std::string>>& text = {});

  const std::string& path() const { return path_; }

  // Rewrites `path` (when it exists and something changes; atomically) without the lines whose
  // number `field` is above `max_value`, lack it, or are not valid JSON (cut short by a kill):
  // the steps a resumed run trains again. Throws Runtime naming the file.
  static void drop_lines_after(const std::string& path, const std::string& field, double max_value);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace hg::obs
