#include "hourglass/obs/op_profile_report.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hg::obs {

namespace {

constexpr size_t kNameWidth = 46;
constexpr size_t kKernelNameChars = 40;  // what short_kernel_name keeps for the table

using RowKey = std::pair<std::string, std::string>;  // (parent, name); kernels: (op key, name)

RowKey op_key(const ops::OpEvent& e) { return {e.depth == 0 ? "" : e.parent, e.name}; }

void add_call(OpProfileRow& r, double ms) {
  if (r.calls == 0) {
    r.min_ms = std::numeric_limits<double>::infinity();
    r.max_ms = 0;
  }
  ++r.calls;
  r.total_ms += ms;
  r.min_ms = std::min(r.min_ms, ms);
  r.max_ms = std::max(r.max_ms, ms);
}

bool by_total(const OpProfileRow& a, const OpProfileRow& b) { return a.total_ms > b.total_ms; }

// "123.4 (56%)", "123.4" without a peak, "—" when there is nothing to rate.
std::string rate_text(double value, double peak, bool known) {
  if (!known) return "—";
  if (peak > 0) return fmt::format("{:.1f} ({:.0f}%)", value, 100 * value / peak);
  return fmt::format("{:.1f}", value);
}

// The phases' rows of format_table and profile_json: each phase's top-level ops, the kernels
// outside ops, and the gaps (only with measured steps), in milliseconds a step when `steps` > 0.
struct PhaseLine {
  std::string name;
  int64_t calls = 0;
  double ms = 0;
};
std::vector<PhaseLine> phase_lines(const OpProfileSummary& s, double step_ms, int64_t steps) {
  std::vector<PhaseLine> out;
  const double per = steps > 0 ? 1.0 / double(steps) : 1.0;
  for (const PhaseTotal& p : s.phases) out.push_back({p.phase, p.calls, p.ms * per});
  if (s.outside_ops_ms > 0) out.push_back({"(outside ops)", 0, s.outside_ops_ms * per});
  if (steps > 0 && step_ms > 0)
    out.push_back({"gaps", 0, step_ms - (s.top_level_ms + s.outside_ops_ms) * per});
  return out;
}

}  // namespace

std::string profile_json(const OpProfileSummary& summary, const OpProfileSource& source) {
  nlohmann::json rows = nlohmann::json::array();
  for (const OpProfileRow& r : summary.rows) {
    nlohmann::json row{{"kind", r.kind == ProfileRowKind::Kernel ? "kernel" : "op"},
                       {"op", r.name},
                       {"parent", r.parent},
                       {"calls", r.calls},
                       {"total_ms", r.total_ms},
                       {"min_ms", r.min_ms},
                       {"max_ms", r.max_ms}};
    if (r.kind == ProfileRowKind::Kernel) {
      row["name"] = r.full_name;
    } else {
      row["flops"] = r.flops;
      row["bytes"] = r.bytes;
      row["tflops"] = r.tflops();
      row["gbps"] = r.gbps();
      if (r.precision != MathPrecision::None) row["precision"] = precision_name(r.precision);
      row["peak_tflops"] = r.peak_tflops;
      row["peak_gbps"] = r.peak_gbps;
    }
    rows.push_back(std::move(row));
  }
  const double steps_ms = source.step_ms * double(source.steps);
  const DevicePeaks& p = summary.peaks;
  nlohmann::json out{{"config", source.config},
                     {"device", source.device},
                     {"timing", summary.timing},
                     {"kernel_activity", summary.kernel_activity},
                     {"peaks",
                      {{"bf16_tflops", p.bf16_tflops},
                       {"f16_tflops", p.f16_tflops},
                       {"tf32_tflops", p.tf32_tflops},
                       {"f32_tflops", p.f32_tflops},
                       {"f64_tflops", p.f64_tflops},
                       {"memory_gbps", p.memory_gbps}}},
                     {"steps", source.steps},
                     {"step_ms", source.step_ms},
                     {"ops_ms", summary.top_level_ms},
                     {"outside_ops_ms", summary.outside_ops_ms},
                     {"ops_share", steps_ms > 0 ? summary.top_level_ms / steps_ms : 0.0}};
  if (source.unprofiled_step_ms > 0) {
    out["unprofiled_step_ms"] = source.unprofiled_step_ms;
    out["profiler_overhead"] = source.step_ms / source.unprofiled_step_ms - 1;
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseTotal& p : summary.phases) {
    nlohmann::json j{{"phase", p.phase}, {"calls", p.calls}, {"ms", p.ms}};
    if (source.steps > 0) j["ms_per_step"] = p.ms / double(source.steps);
    phases.push_back(std::move(j));
  }
  if (source.steps > 0 && source.step_ms > 0)
    for (const PhaseLine& l : phase_lines(summary, source.step_ms, source.steps))
      if (l.name == "(outside ops)" || l.name == "gaps")
        phases.push_back({{"phase", l.name}, {"ms_per_step", l.ms}});
  out["phases"] = std::move(phases);
  if (!source.profiled_steps.empty()) out["profiled_steps"] = source.profiled_steps;
  if (!source.unprofiled_steps.empty()) out["unprofiled_steps"] = source.unprofiled_steps;
  out["rows"] = std::move(rows);
  return out.dump();
}

OpProfileSummary summarize(ops::OpProfiler& profiler) {
  return summarize(profiler, peaks_of(profiler.device()));
}

OpProfileSummary summarize(ops::OpProfiler& profiler, const DevicePeaks& peaks) {
  OpProfileSummary s;
  s.kernel_activity = profiler.uses_kernel_activity();
  s.timing = profiler.timing_note();
  s.peaks = peaks;
  const std::vector<ops::OpEvent>& events = profiler.events();
  // Each call's cost with its inner ops' (a child's index is above its parent's).
  std::vector<ops::OpCost> cost(events.size());
  for (size_t i = 0; i < events.size(); ++i) cost[i] = events[i].cost;
  for (size_t i = events.size(); i-- > 0;) {
    const int parent = events[i].parent_index;
    if (parent < 0) continue;
    ops::OpCost& c = cost[size_t(parent)];
    c.flops += cost[i].flops;
    c.bytes += cost[i].bytes;
    if (c.precision == MathPrecision::None) c.precision = cost[i].precision;
  }
  std::map<RowKey, OpProfileRow> by_key;
  for (size_t i = 0; i < events.size(); ++i) {
    const ops::OpEvent& e = events[i];
    const double ms = profiler.device_ms(e);
    OpProfileRow& r = by_key[op_key(e)];
    if (r.calls == 0) {
      r.name = e.name;
      r.parent = e.depth == 0 ? "" : e.parent;
      r.depth = e.depth == 0 ? 0 : 1;
    }
    add_call(r, ms);
    r.flops += cost[i].flops;
    r.bytes += cost[i].bytes;
    if (r.precision == MathPrecision::None) r.precision = cost[i].precision;
    if (e.depth == 0) {
      s.top_level_ms += ms;
      const std::string phase = *e.phase != '\0' ? e.phase : "(no phase)";
      auto it = std::find_if(s.phases.begin(), s.phases.end(),
                             [&](const PhaseTotal& p) { return p.phase == phase; });
      if (it == s.phases.end()) it = s.phases.insert(s.phases.end(), PhaseTotal{phase});
      ++it->calls;
      it->ms += ms;
    }
  }
  // Kernels by the op row of the op that launched them.
  std::map<RowKey, std::map<std::string, OpProfileRow>> kernels;
  for (const KernelRecord& k : profiler.kernels()) {
    const double ms = (k.end_us - k.start_us) / 1000;
    RowKey owner{"", "(outside ops)"};
    int depth = 1;
    if (k.op_id > 0 && k.op_id <= events.size()) {
      const ops::OpEvent& e = events[k.op_id - 1];
      owner = op_key(e);
      depth = e.depth == 0 ? 1 : 2;
    } else {
      s.outside_ops_ms += ms;
    }
    OpProfileRow& r = kernels[owner][k.name];
    if (r.calls == 0) {
      r.kind = ProfileRowKind::Kernel;
      r.full_name = k.name;
      r.name =
          k.kind == ActivityKind::Kernel ? short_kernel_name(k.name, kKernelNameChars) : k.name;
      r.parent = owner.second;
      r.depth = depth;
    }
    add_call(r, ms);
    r.bytes += double(k.bytes);
  }
  auto push_op = [&](const RowKey& key, const OpProfileRow& row) {
    OpProfileRow r = row;
    if (r.flops > 0) r.peak_tflops = peaks.tflops(r.precision);
    if (r.bytes > 0) r.peak_gbps = peaks.memory_gbps;
    s.rows.push_back(std::move(r));
    const auto it = kernels.find(key);
    if (it == kernels.end()) return;
    std::vector<OpProfileRow> ks;
    for (auto& [name, k] : it->second) ks.push_back(k);
    std::sort(ks.begin(), ks.end(), by_total);
    s.rows.insert(s.rows.end(), ks.begin(), ks.end());
  };
  std::vector<std::pair<RowKey, OpProfileRow>> top, inner;
  for (auto& [key, row] : by_key) (row.parent.empty() ? top : inner).emplace_back(key, row);
  auto by_row_total = [](const auto& a, const auto& b) { return by_total(a.second, b.second); };
  std::sort(top.begin(), top.end(), by_row_total);
  std::sort(inner.begin(), inner.end(), by_row_total);
  for (const auto& [tkey, t] : top) {
    push_op(tkey, t);
    for (const auto& [ikey, i] : inner)
      if (i.parent == t.name) push_op(ikey, i);
  }
  for (const auto& entry : inner) {  // inner ops of ops never called at the top level
    const std::string& parent = entry.second.parent;
    if (std::none_of(top.begin(), top.end(),
                     [&](const auto& t) { return t.second.name == parent; }))
      push_op(entry.first, entry.second);
  }
  const RowKey outside{"", "(outside ops)"};
  if (kernels.count(outside)) {
    OpProfileRow r;
    r.name = outside.second;
    for (const auto& [name, k] : kernels[outside]) {
      r.calls += k.calls;
      r.total_ms += k.total_ms;
      r.min_ms = r.calls == k.calls ? k.min_ms : std::min(r.min_ms, k.min_ms);
      r.max_ms = std::max(r.max_ms, k.max_ms);
    }
    push_op(outside, r);
  }
  return s;
}

std::string format_table(const OpProfileSummary& summary, double step_ms, int64_t steps) {
  std::string out = fmt::format("device times: {}\n", summary.timing);
  const DevicePeaks& p = summary.peaks;
  if (p.memory_gbps > 0 || p.bf16_tflops > 0) {
    auto peak = [](double v) { return v > 0 ? fmt::format("{:.1f}", v) : std::string("—"); };
    out += fmt::format(
        "device peaks: {} bf16 / {} tf32 / {} f32 TFLOP/s, {} GB/s (rates below: achieved, "
        "and % of the peak)\n",
        peak(p.bf16_tflops), peak(p.tf32_tflops), peak(p.f32_tflops), peak(p.memory_gbps));
  }
  out += fmt::format("{:<{}} {:>8} {:>11} {:>10} {:>10} {:>10} {:>7} {:>13} {:>13}\n", "op",
                     kNameWidth, "calls", "total ms", "mean ms", "min ms", "max ms", "share",
                     "TFLOP/s", "GB/s");
  for (const OpProfileRow& r : summary.rows) {
    const bool kernel = r.kind == ProfileRowKind::Kernel;
    const int indent = kernel ? 2 * (r.depth - 1) + 4 : 2 * r.depth;
    const std::string name = std::string(size_t(indent), ' ') + r.name;
    const double share = summary.top_level_ms > 0 ? 100 * r.total_ms / summary.top_level_ms : 0;
    const std::string tflops =
        kernel ? "" : rate_text(r.tflops(), r.peak_tflops, r.flops > 0 && r.total_ms > 0);
    const std::string gbps =
        kernel ? "" : rate_text(r.gbps(), r.peak_gbps, r.bytes > 0 && r.total_ms > 0);
    out += fmt::format(
        "{:<{}} {:>8} {:>11.3f} {:>10.4f} {:>10.4f} {:>10.4f} {:>6.1f}% {:>13} {:>13}\n", name,
        kNameWidth, r.calls, r.total_ms, r.total_ms / double(r.calls), r.min_ms, r.max_ms, share,
        tflops, gbps);
  }
  out += fmt::format("{:<{}} {:>8} {:>11.3f}\n", "all ops (top level)", kNameWidth, "",
                     summary.top_level_ms);
  if (steps > 0 && step_ms > 0)
    out += fmt::format(
        "{} steps of {:.3f} ms measured: the ops account for {:.1f}% of the step time (the rest "
        "is time between ops: the host, the loader, waits{})\n",
        steps, step_ms, 100 * summary.top_level_ms / (step_ms * double(steps)),
        summary.kernel_activity ? "; with kernel times, also the gaps between an op's kernels"
                                : "");
  const bool per_step = steps > 0 && step_ms > 0;
  const std::vector<PhaseLine> lines = phase_lines(summary, step_ms, steps);
  if (!summary.phases.empty() &&
      (summary.phases.size() > 1 || summary.phases[0].phase != "(no phase)")) {
    out += fmt::format("{:<{}} {:>8} {:>11} {:>7}\n", "phase", kNameWidth, "calls",
                       per_step ? "ms a step" : "total ms", per_step ? "share" : "");
    for (const PhaseLine& l : lines) {
      const std::string calls = l.calls > 0 ? fmt::format("{}", l.calls) : "";
      const std::string share = per_step ? fmt::format("{:.1f}%", 100 * l.ms / step_ms) : "";
      out += fmt::format("{:<{}} {:>8} {:>11.3f} {:>7}\n", l.name, kNameWidth, calls, l.ms, share);
    }
    if (per_step && summary.kernel_activity)
      out +=
          "(gaps: the measured step less its kernels' time, negative where kernels overlapped)\n";
  }
  return out;
}

std::string chrome_trace_json(ops::OpProfiler& profiler) {
  nlohmann::json events = nlohmann::json::array();
  auto thread_name = [&](int tid, const std::string& name) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", tid},
                      {"args", {{"name", name}}}});
  };
  const bool kernels = profiler.uses_kernel_activity();
  thread_name(1, "host (ops issued)");
  thread_name(2, profiler.device().str() + " (ops run)");
  if (kernels) thread_name(3, profiler.device().str() + " (kernels)");
  const std::vector<ops::OpEvent>& ops_run = profiler.events();
  for (const ops::OpEvent& e : ops_run) {
    const std::string cat = e.depth == 0 ? "op" : std::string("inner op of ") + e.parent;
    const nlohmann::json args =
        *e.phase != '\0' ? nlohmann::json{{"phase", e.phase}} : nlohmann::json::object();
    events.push_back({{"name", e.name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", e.host_start_us},
                      {"dur", e.host_end_us - e.host_start_us},
                      {"args", args}});
    if (kernels && profiler.device_ms(e) <= 0) continue;  // ran no kernel
    const double start_ms = profiler.device_start_ms(e);
    events.push_back({{"name", e.name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 2},
                      {"ts", 1000 * start_ms},
                      {"dur", 1000 * std::max(0.0, profiler.device_end_ms(e) - start_ms)},
                      {"args", args}});
  }
  if (kernels) {
    for (const KernelRecord& k : profiler.kernels()) {
      const bool in_op = k.op_id > 0 && k.op_id <= ops_run.size();
      const char* op = in_op ? ops_run[k.op_id - 1].name : "(outside ops)";
      nlohmann::json args{{"op", op}, {"name", k.name}, {"stream", k.stream}};
      if (in_op && *ops_run[k.op_id - 1].phase != '\0') args["phase"] = ops_run[k.op_id - 1].phase;
      if (k.bytes > 0) args["bytes"] = k.bytes;
      events.push_back(
          {{"name", k.kind == ActivityKind::Kernel ? short_kernel_name(k.name, 60) : k.name},
           {"cat", k.kind == ActivityKind::Kernel ? "kernel" : "memory"},
           {"ph", "X"},
           {"pid", 1},
           {"tid", 3},
           {"ts", k.start_us},
           {"dur", k.end_us - k.start_us},
           {"args", std::move(args)}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace hg::obs
