// Logging through spdlog: one logger named "hourglass", level set from the CLI. Log lines
// (information, warnings, errors) go to stderr, so that stdout carries only a command's results;
// a run can copy them into a file in its run directory.
#pragma once

#include <spdlog/spdlog.h>

#include <mutex>
#include <string>

namespace hg {

// Sets the global level from "debug", "info", "warn", "error" or "off".
void set_log_level(const std::string& level);

// Whether log lines are colored, from --color: "always", "never" or "auto" (a terminal on
// stderr and no NO_COLOR environment variable set to a non-empty value: https://no-color.org).
bool log_colors_wanted(const std::string& color);

// Makes the default logger write to stderr, colored by `log_colors_wanted(color)`, with the
// CLI's line pattern. Keeps the level set before.
void init_logging(const std::string& color);

// From now on log lines are appended to `path` too (with the date). Once per process; an
// error names the file.
void add_log_file(const std::string& path);

// A line redrawn in place on stderr (the progress bar on a terminal). While one is set, a log
// line written to stderr first clears it and then has it redrawn below the log line, so no log
// line is spliced into it. Its draws and the log's stderr writes hold terminal_mutex().
class LiveLine {
 public:
  virtual ~LiveLine() = default;
  virtual void clear_for_log() = 0;     // erases the line (the cursor at its start)
  virtual void redraw_after_log() = 0;  // draws it again
};
// Sets the live line (null: none). The caller unsets it before the line goes away.
void set_live_line(LiveLine* line);
std::recursive_mutex& terminal_mutex();

// Appends a line (at info level) to the log file of add_log_file only, when there is one: for
// what is already printed on stderr another way (the progress bar's epoch summaries).
void log_to_file_only(const std::string& line);

}  // namespace hg

#define HG_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define HG_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define HG_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define HG_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
