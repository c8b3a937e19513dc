// Progress of one epoch on stderr.
//
// On a terminal one line is redrawn in place, at most ~10 times a second:
//   epoch 2/10 [#####...............] 120/469 loss 0.4123 acc 0.871 1234 img/s eta 0:35
// When stderr is a file or pipe (CI logs, nohup), in-place redraws would leave a mess of
// carriage returns, so a plain line is printed each time another 25% of the epoch is done:
//   epoch 2/10 120/469 (25%) loss 0.4123 acc 0.871 1234 img/s eta 0:35
// finish() then prints "<label> <summary>" on its own line in every mode.
//
// Statistics are name/value pairs; a name ending in "/s" is a rate, shown as "1234 img/s",
// any other as "loss 0.4123" (4 significant digits). The ETA comes from the bar's own clock.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/base/log.h"

namespace hg::obs {

enum class ProgressMode {
  Off,       // only finish() prints
  Terminal,  // one line redrawn in place
  Plain,     // a line every `plain_every_percent` percent
};

struct ProgressOptions {
  double min_redraw_seconds = 0.1;  // terminal: at most ~10 redraws a second
  int plain_every_percent = 25;
  int bar_width = 20;
  int max_line_width = 0;         // 0: unlimited; lines longer than this are cut (no wrap)
  std::function<double()> clock;  // seconds; default: a steady clock (tests inject one)
};

using ProgressStats = std::vector<std::pair<std::string, double>>;

class ProgressBar : private LiveLine {
 public:
  // Draws on stderr: Terminal when stderr is a terminal (cut to its width), else Plain; Off
  // when `enabled` is false. `label` starts every line ("epoch 2/10"); `total` is the number
  // of steps in the epoch (0 or less when unknown: no bar, percentage or ETA).
  ProgressBar(bool enabled, std::string label, int64_t total);
  ProgressBar(std::ostream& out, ProgressMode mode, std::string label, int64_t total,
              ProgressOptions options = {});
  // Ends an unfinished terminal line so that what is printed next starts on its own line.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Whether update() would print now. Cheap; lets a caller skip reading statistics (which
  // may wait for a device) when nothing would be shown. `done` is the step count the update
  // would carry; without it, Plain mode answers by time like Terminal mode and update()
  // prints once the next percentage mark has been passed.
  bool wants_update(int64_t done = -1) const;
  // Reports `done` of `total` steps with the current statistics; prints if due.
  void update(int64_t done, const ProgressStats& stats);
  // Clears the in-place line (if any) and prints "<label> <summary>".
  void finish(const std::string& summary);
  // Text shown after " | " at the end of every later line ("run eta 1:02:03, budget 41% used").
  void set_suffix(std::string suffix) { suffix_ = std::move(suffix); }

 private:
  double now() const;
  std::string line(int64_t done, const ProgressStats& stats, bool with_bar) const;
  void emit_terminal(std::string text);
  // LiveLine: log lines on stderr clear the drawn line and have it drawn again below them.
  void clear_for_log() override;
  void redraw_after_log() override;

  std::ostream& out_;
  ProgressMode mode_;
  std::string label_;
  int64_t total_;
  ProgressOptions options_;
  double start_ = 0;
  double last_draw_ = -1e300;  // time of the last terminal draw or update() call
  int next_percent_ = 0;       // Plain: the next mark to print at
  bool line_open_ = false;     // Terminal: a drawn line not yet ended by a newline
  std::string drawn_;          // Terminal: the text of the open line
  std::string suffix_;
  bool live_ = false;  // registered as stderr's live line (base/log.h)
};

// Formats one statistic the way the progress line shows it: "loss 0.4123", "1234 img/s".
std::string format_stat(const std::string& name, double value);

}  // namespace hg::obs
