// What the metrics files (metrics_jsonl.h, metrics_csv.h) share: the error for a failed call on
// one, and writing a whole string to its descriptor.
#pragma once

#include <string>

namespace hg::obs::detail {

// Runtime error "cannot <what> metrics file <path>: <errno's text>", with the remedy.
[[noreturn]] void throw_metrics_io(const std::string& path, const char* what);

// Writes all of `text` to `fd` (retrying short writes and EINTR); throw_metrics_io otherwise.
void write_all(int fd, const std::string& text, const std::string& path);

}  // namespace hg::obs::detail
