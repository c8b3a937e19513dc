// What the op profiler recorded (ops/op_profile.h), summarised: a table like `rocprof --stats`
// (name, calls, total, mean, min, max and share of the ops' time, sorted by total, each op's inner
// ops listed under it) and a Chrome / Perfetto trace (JSON "traceEvents": the host thread and the
// device's timeline as two rows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hourglass/ops/op_profile.h"

namespace hg::obs {

struct OpProfileRow {
  std::string name;
  std::string parent;  // "" for ops called from outside the ops
  int64_t calls = 0;
  double total_ms = 0, min_ms = 0, max_ms = 0;  // device time
};

struct OpProfileSummary {
  std::vector<OpProfileRow> rows;  // top-level ops by total, each followed by its inner ops
  double top_level_ms = 0;         // the top-level ops' device time together
};

// Waits for the device to have run every recorded op.
OpProfileSummary summarize(ops::OpProfiler& profiler);

// The table; `step_ms` and `steps` (when > 0) add a line comparing the ops' time with the
// measured steps'.
std::string format_table(const OpProfileSummary& summary, double step_ms, int64_t steps);

// The profile as one JSON object, what `hourglass profile --json` prints and a run's
// profile.json holds (`profile.enabled`): where it came from, the device, the steps and their
// measured milliseconds, the ops' milliseconds and share of them, and a row per table line
// (op, parent, calls, total_ms, min_ms, max_ms).
struct OpProfileSource {
  std::string config;  // the config file profiled
  std::string device;
  int64_t steps = 0;
  double step_ms = 0;             // measured, profiler on
  double unprofiled_step_ms = 0;  // the same steps with the profiler off; 0: not measured
};
std::string profile_json(const OpProfileSummary& summary, const OpProfileSource& source);

// Chrome's trace event format: complete events ("ph": "X", microseconds) on thread 1 (host:
// when each op was issued) and thread 2 (device: when it ran).
std::string chrome_trace_json(ops::OpProfiler& profiler);

}  // namespace hg::obs
