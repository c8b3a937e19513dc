// What the op profiler recorded (ops/op_profile.h), summarised: a table like `rocprof --stats`
// (name, calls, total, mean, min, max and share of the ops' time, sorted by total, each op's inner
// ops listed under it, and, with kernel activity, each op's kernels indented under it), with the
// achieved TFLOP/s and GB/s of each op against the device's peaks (device/device_peaks.h), and a
// Chrome / Perfetto trace (JSON "traceEvents": the host thread, the device's ops and, with kernel
// activity, the device's kernels as rows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hourglass/device/device_peaks.h"
#include "hourglass/ops/op_profile.h"

namespace hg::obs {

enum class ProfileRowKind : uint8_t { Op, Kernel };

struct OpProfileRow {
  ProfileRowKind kind = ProfileRowKind::Op;
  std::string name;       // the op; a kernel's short name (short_kernel_name)
  std::string full_name;  // a kernel's demangled name ("" for ops)
  std::string parent;     // an op: the op whose body called it ("" at the top level); a
                          // kernel: the op that launched it
  int depth = 0;          // indentation: inner ops 1, kernels one more than their op
  int64_t calls = 0;
  double total_ms = 0, min_ms = 0, max_ms = 0;  // device time
  // Ops: what their calls asked of the device (FLOPs, bytes; their inner ops' included) and the
  // peaks they compare with (0: unknown).
  double flops = 0, bytes = 0;
  MathPrecision precision = MathPrecision::None;
  double peak_tflops = 0, peak_gbps = 0;
  double tflops() const { return total_ms > 0 ? flops / (total_ms * 1e-3) / 1e12 : 0; }
  double gbps() const { return total_ms > 0 ? bytes / (total_ms * 1e-3) / 1e9 : 0; }
};

// The top-level ops' device time in one phase of the training step (ops::set_profile_phase).
struct PhaseTotal {
  std::string phase;  // "forward", "backward", "update"; "(no phase)" for ops outside a step
  int64_t calls = 0;
  double ms = 0;
};

struct OpProfileSummary {
  std::vector<OpProfileRow> rows;  // top-level ops by total, each followed by its kernels and
                                   // inner ops (each with its kernels); then "(outside ops)"
  double top_level_ms = 0;         // the top-level ops' device time together
  double outside_ops_ms = 0;       // kernels launched outside any op (kernel activity)
  std::vector<PhaseTotal> phases;  // top_level_ms by phase, in the order the phases first ran
  bool kernel_activity = false;
  std::string timing;  // OpProfiler::timing_note()
  DevicePeaks peaks;
};

// Waits for the device to have run every recorded op. `peaks` defaults to the profiler's
// device's (peaks_of).
OpProfileSummary summarize(ops::OpProfiler& profiler);
OpProfileSummary summarize(ops::OpProfiler& profiler, const DevicePeaks& peaks);

// The table; `step_ms` and `steps` (when > 0) add a line comparing the ops' time with the
// measured steps', and a table of the phases: the device milliseconds a step of each (its
// top-level ops'), of the kernels launched outside any op, and the gaps (the measured step less
// all of that: the device idle between kernels, or, negative, kernels that overlapped). Rates
// the profile cannot give (no FLOPs, no peak) show as "—".
std::string format_table(const OpProfileSummary& summary, double step_ms, int64_t steps);

// The profile as one JSON object, what `hourglass profile --json` prints and a run's
// profile.json holds (`profile.enabled`): where it came from, the device, how device times were
// taken, the peaks, the steps and their measured milliseconds, the ops' milliseconds and share
// of them, the phases (phase, calls, ms, ms_per_step; then "(outside ops)" and "gaps" per step
// when the steps were measured), and a row per table line (kind "op" or "kernel", op, parent,
// calls, total_ms, min_ms, max_ms; ops: flops, bytes, tflops, gbps and the peaks; kernels: the
// demangled name).
struct OpProfileSource {
  std::string config;  // the config file profiled
  std::string device;
  int64_t steps = 0;
  double step_ms = 0;             // measured, profiler on
  double unprofiled_step_ms = 0;  // the same steps with the profiler off; 0: not measured
  // How the profiled and the unprofiled steps ran: "graph replay" or "eager" ("": not said).
  std::string profiled_steps, unprofiled_steps;
};
std::string profile_json(const OpProfileSummary& summary, const OpProfileSource& source);

// Chrome's trace event format: complete events ("ph": "X", microseconds) on thread 1 (host:
// when each op was issued), thread 2 (device: when each op ran) and, with kernel activity,
// thread 3 (device: each kernel, copy and fill, with its op).
std::string chrome_trace_json(ops::OpProfiler& profiler);

}  // namespace hg::obs
