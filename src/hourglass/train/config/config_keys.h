// Reading a config's keys with their ranges checked (errors name the key, where it came from and
// the range), and the tables every kind of run shares: [checkpoint], [metrics] and [monitor].
#pragma once

#include <cstdint>
#include <string>

#include "hourglass/base/config.h"
#include "hourglass/train/config/run_config.h"

namespace hg::train {

// Throws InvalidInput "config key '<key>' <origin> <what>" unless `ok`.
void check_range(bool ok, const Config& c, const char* key, const std::string& what);

// An integer key within [lo, hi], checked on the int64 before any narrowing (so 2^32 + 1 is
// refused, not read as 1). `rule` says the range in words for the message.
int64_t int_in(const Config& c, const char* key, int64_t default_value, int64_t lo, int64_t hi,
               const std::string& rule);

enum class Upper { Closed, Open };

// A float key within [lo, hi] or [lo, hi); Config's getter has refused NaN and inf already.
// `rule` is the range in words ("in [0, 1)", "non-negative").
double double_in(const Config& c, const char* key, double default_value, double lo, double hi,
                 Upper upper, const std::string& rule);

// [checkpoint]: every (a duration string or seconds), every_steps, keep_last.
CheckpointConfig parse_checkpoint_config(const Config& c);
// [metrics]: every_steps, csv, tensorboard.
MetricsConfig parse_metrics_config(const Config& c);
// [monitor]: every_seconds (0 turns the monitor off).
MonitorConfig parse_monitor_config(const Config& c);

}  // namespace hg::train
