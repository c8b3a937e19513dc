#include "hourglass/obs/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "hourglass/base/duration.h"
#include "hourglass/base/error.h"

namespace hg::obs {

namespace {

// Terminal columns of stderr, or 0 when unknown.
int stderr_columns() {
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0) return ws.ws_col;
  return 0;
}

ProgressMode stderr_mode(bool enabled) {
  if (!enabled) return ProgressMode::Off;
  return ::isatty(::fileno(stderr)) ? ProgressMode::Terminal : ProgressMode::Plain;
}

ProgressOptions stderr_options() {
  ProgressOptions o;
  o.max_line_width = stderr_columns();
  return o;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string format_stat(const std::string& name, double value) {
  if (ends_with(name, "/s")) return fmt::format("{:.0f} {}", value, name);
  // 4 significant digits fit losses and accuracies; large counts print whole.
  if (std::isfinite(value) && std::fabs(value) >= 1e4) return fmt::format("{} {:.0f}", name, value);
  return fmt::format("{} {:.4g}", name, value);
}

ProgressBar::ProgressBar(bool enabled, std::string label, int64_t total)
    : ProgressBar(std::cerr, stderr_mode(enabled), std::move(label), total, stderr_options()) {}

ProgressBar::ProgressBar(std::ostream& out, ProgressMode mode, std::string label, int64_t total,
                         ProgressOptions options)
    : out_(out),
      mode_(mode),
      label_(std::move(label)),
      total_(total),
      options_(std::move(options)) {
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  options_.plain_every_percent = std::clamp(options_.plain_every_percent, 1, 100);
  options_.bar_width = std::max(options_.bar_width, 1);
  next_percent_ = options_.plain_every_percent;
  start_ = now();
  // Log lines are written to stderr: a line drawn in place there must make way for them.
  live_ = mode_ == ProgressMode::Terminal && &out_ == &std::cerr;
  if (live_) set_live_line(this);
}

ProgressBar::~ProgressBar() {
  if (live_) set_live_line(nullptr);
  if (mode_ == ProgressMode::Terminal && line_open_) out_ << '\n' << std::flush;
}

void ProgressBar::clear_for_log() {
  if (line_open_) out_ << "\r\x1b[K" << std::flush;
}

void ProgressBar::redraw_after_log() {
  if (line_open_) out_ << drawn_ << "\x1b[K" << std::flush;
}

double ProgressBar::now() const { return options_.clock(); }

bool ProgressBar::wants_update(int64_t done) const {
  const bool interval_passed = now() - last_draw_ >= options_.min_redraw_seconds;
  switch (mode_) {
    case ProgressMode::Off: return false;
    case ProgressMode::Terminal: return interval_passed || (total_ > 0 && done == total_);
    case ProgressMode::Plain:
      if (total_ <= 0 || next_percent_ >= 100) return false;
      if (done < 0) return interval_passed;
      return done * 100 / total_ >= next_percent_;
  }
  return false;
}

void ProgressBar::update(int64_t done, const ProgressStats& stats) {
  switch (mode_) {
    case ProgressMode::Off: return;
    case ProgressMode::Terminal: {
      const double t = now();
      // The last step always draws, so the bar visibly completes before evaluation starts.
      if (t - last_draw_ < options_.min_redraw_seconds && !(total_ > 0 && done >= total_)) return;
      last_draw_ = t;
      emit_terminal(line(done, stats, true));
      return;
    }
    case ProgressMode::Plain: {
      last_draw_ = now();
      if (total_ <= 0) return;
      const int64_t percent = done * 100 / total_;
      // No line at 100%: finish() follows with the epoch's summary.
      if (percent < next_percent_ || percent >= 100) return;
      out_ << line(done, stats, false) << '\n' << std::flush;
      const int every = options_.plain_every_percent;
      next_percent_ = int(percent / every + 1) * every;
      return;
    }
  }
}

void ProgressBar::finish(const std::string& summary) {
  std::lock_guard<std::recursive_mutex> lock(terminal_mutex());
  if (mode_ == ProgressMode::Terminal && line_open_) out_ << "\r\x1b[K";
  line_open_ = false;
  out_ << label_ << (summary.empty() ? "" : " ") << summary << '\n' << std::flush;
}

std::string ProgressBar::line(int64_t done, const ProgressStats& stats, bool with_bar) const {
  std::string s = label_;
  const bool known = total_ > 0;
  const int64_t clamped = known ? std::clamp<int64_t>(done, 0, total_) : done;
  if (known && with_bar) {
    const int width = options_.bar_width;
    const int filled = int(clamped * width / total_);
    s += " [";
    s.append(size_t(filled), '#').append(size_t(width - filled), '.') += ']';
  }
  s += known ? fmt::format(" {}/{}", done, total_) : fmt::format(" {}", done);
  if (known && !with_bar) s += fmt::format(" ({}%)", clamped * 100 / total_);
  for (const auto& [name, value] : stats) {
    s += ' ';
    s += format_stat(name, value);
  }
  if (known && clamped > 0) {
    const double elapsed = now() - start_;
    s += " eta ";
    s += format_duration_clock(elapsed / double(clamped) * double(total_ - clamped));
  }
  if (!suffix_.empty()) s += " | " + suffix_;
  return s;
}

void ProgressBar::emit_terminal(std::string text) {
  // A line wider than the terminal would wrap, and "\r" would then redraw only its last part.
  if (options_.max_line_width > 1 && text.size() >= size_t(options_.max_line_width))
    text.resize(size_t(options_.max_line_width - 1));
  // "\r" returns to the line start; "\x1b[K" erases what a longer previous line left behind.
  std::lock_guard<std::recursive_mutex> lock(terminal_mutex());
  out_ << '\r' << text << "\x1b[K" << std::flush;
  drawn_ = std::move(text);
  line_open_ = true;
}

}  // namespace hg::obs
