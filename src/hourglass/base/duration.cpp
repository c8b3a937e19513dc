#include "hourglass/base/duration.h"

#include <unistd.h>
#include <cctype>
#include <charconv>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg {

namespace {

[[noreturn]] void bad_duration(std::string_view text, std::string_view why) {
  throw_invalid(fmt::format("invalid duration '{}': {}", untrusted_excerpt(text), why),
                "write a number followed by d, h, m, s or ms, such as 90s, 10m, 1h30m or 1.5h; "
                "a plain number means seconds");
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

double parse_duration_seconds(std::string_view text) {
  // Trim surrounding whitespace; inner spaces between components are allowed too.
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  const std::string_view body = text.substr(b, e - b);
  if (body.empty()) bad_duration(text, "it is empty");

  double total = 0;
  size_t i = 0;
  int components = 0;
  while (i < body.size()) {
    while (i < body.size() && body[i] == ' ') ++i;
    // The number: digits with at most one decimal point (no sign, no exponent).
    const size_t start = i;
    while (i < body.size() && (is_digit(body[i]) || body[i] == '.')) ++i;
    if (i == start)
      bad_duration(text,
                   fmt::format("expected a number at '{}'", untrusted_excerpt(body.substr(start))));
    double value = 0;
    const auto [end, ec] = std::from_chars(body.data() + start, body.data() + i, value);
    if (ec != std::errc() || end != body.data() + i)
      bad_duration(text, fmt::format("'{}' is not a number",
                                     untrusted_excerpt(body.substr(start, i - start))));
    // The unit; none allowed only for a lone plain number.
    const size_t unit_start = i;
    while (i < body.size() && std::isalpha(static_cast<unsigned char>(body[i]))) ++i;
    const std::string_view unit = body.substr(unit_start, i - unit_start);
    double scale;
    if (unit.empty()) {
      if (components > 0 || i != body.size())
        bad_duration(text, "every part after the first needs a unit");
      scale = 1;
    } else if (unit == "d") {
      scale = 86400;
    } else if (unit == "h") {
      scale = 3600;
    } else if (unit == "m") {
      scale = 60;
    } else if (unit == "s") {
      scale = 1;
    } else if (unit == "ms") {
      scale = 1e-3;
    } else {
      bad_duration(text, fmt::format("unknown unit '{}'", untrusted_excerpt(unit)));
    }
    total += value * scale;
    ++components;
    while (i < body.size() && body[i] == ' ') ++i;
  }
  if (!std::isfinite(total)) bad_duration(text, "it is too large");
  return total;
}

std::string format_duration_clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(std::llround(seconds));
  const long long h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, s);
  return fmt::format("{}:{:02}", m, s);
}

namespace {

const auto g_loaded = std::chrono::steady_clock::now();

// Seconds between boot and this process's start, or a negative value when /proc says nothing.
double process_start_after_boot() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)  // field 22: starttime, in clock ticks
    if (i == 22) {
      const long ticks = sysconf(_SC_CLK_TCK);
      return ticks > 0 ? std::stod(field) / double(ticks) : -1;
    }
  return -1;
}

}  // namespace

double seconds_since_process_start() {
  try {
    static const double start = process_start_after_boot();
    double uptime = -1;
    if (std::ifstream in("/proc/uptime"); in >> uptime && start >= 0 && uptime >= start)
      return uptime - start;
  } catch (const std::exception&) {  // a malformed number: fall back
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_loaded).count();
}

}  // namespace hg
