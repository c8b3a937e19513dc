#include "hourglass/train/config/config_keys.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "hourglass/base/duration.h"
#include "hourglass/base/error.h"

namespace hg::train {

void check_range(bool ok, const Config& c, const char* key, const std::string& what) {
  if (!ok) throw_invalid(fmt::format("config key '{}' {} {}", key, c.origin(key), what));
}

// An integer key within [lo, hi], checked on the int64 before any narrowing (so 2^32 + 1 is
// refused, not read as 1). `rule` says the range in words for the message.
int64_t int_in(const Config& c, const char* key, int64_t default_value, int64_t lo, int64_t hi,
               const std::string& rule) {
  const int64_t v = c.get_int(key, default_value);
  if (v < lo || v > hi)
    throw_invalid(fmt::format("config key '{}' {} {}, found {}", key, c.origin(key), rule, v),
                  fmt::format("set {} to a value in [{}, {}]", key, lo, hi));
  return v;
}

// A float key within [lo, hi] or [lo, hi); Config's getter has refused NaN and inf already.
// `rule` is the range in words ("in [0, 1)", "non-negative").
double double_in(const Config& c, const char* key, double default_value, double lo, double hi,
                 Upper upper, const std::string& rule) {
  const double v = c.get_double(key, default_value);
  if (v < lo || v > hi || (upper == Upper::Open && v == hi))
    throw_invalid(
        fmt::format("config key '{}' {} must be {}, found {}", key, c.origin(key), rule, v),
        fmt::format("change {}: it must be {}", key, rule));
  return v;
}

namespace {

// checkpoint.every: a duration string ("10m", "90s") or a number of seconds.
double read_every_seconds(const Config& c) {
  const char* key = "checkpoint.every";
  if (!c.has(key)) return CheckpointConfig{}.every_seconds;
  std::optional<std::string> text;
  try {
    text = c.get_string(key, "");
  } catch (const Error&) {
    // Not a string: a plain number of seconds (the getter reports any other type).
  }
  if (!text) {
    const double seconds = c.get_double(key, 0.0);
    check_range(seconds >= 0 && std::isfinite(seconds), c, key, "must be a non-negative duration");
    return seconds;
  }
  try {
    return parse_duration_seconds(*text);
  } catch (const Error& e) {
    throw_invalid(fmt::format("{}: {}: {}", c.source(), key, e.message()), e.remedy());
  }
}

}  // namespace

CheckpointConfig parse_checkpoint_config(const Config& c) {
  CheckpointConfig k;
  k.every_seconds = read_every_seconds(c);
  k.every_steps = int_in(c, "checkpoint.every_steps", 0, 0, std::numeric_limits<int64_t>::max(),
                         "must be non-negative (0 = off)");
  k.keep_last = int_in(c, "checkpoint.keep_last", 3, 1, 1 << 20, "must be in [1, 1048576]");
  return k;
}

MetricsConfig parse_metrics_config(const Config& c) {
  MetricsConfig m;
  m.every_steps =
      int_in(c, "metrics.every_steps", m.every_steps, 0, std::numeric_limits<int64_t>::max(),
             "must be non-negative (0 = no per-step records)");
  m.csv = c.get_bool("metrics.csv", m.csv);
  m.tensorboard = c.get_bool("metrics.tensorboard", m.tensorboard);
  return m;
}

MonitorConfig parse_monitor_config(const Config& c) {
  MonitorConfig m;
  m.every_seconds = double_in(c, "monitor.every_seconds", 5, 0, 3600, Upper::Closed,
                              "in [0, 3600] seconds (0 = no monitor)");
  check_range(m.every_seconds == 0 || m.every_seconds >= 0.05, c, "monitor.every_seconds",
              "must be 0 (off) or at least 0.05 seconds");
  return m;
}

}  // namespace hg::train
