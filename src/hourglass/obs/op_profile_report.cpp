#include "hourglass/obs/op_profile_report.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hg::obs {

std::string profile_json(const OpProfileSummary& summary, const OpProfileSource& source) {
  nlohmann::json rows = nlohmann::json::array();
  for (const OpProfileRow& r : summary.rows)
    rows.push_back({{"op", r.name},
                    {"parent", r.parent},
                    {"calls", r.calls},
                    {"total_ms", r.total_ms},
                    {"min_ms", r.min_ms},
                    {"max_ms", r.max_ms}});
  const double steps_ms = source.step_ms * double(source.steps);
  nlohmann::json out{{"config", source.config},
                     {"device", source.device},
                     {"steps", source.steps},
                     {"step_ms", source.step_ms},
                     {"ops_ms", summary.top_level_ms},
                     {"ops_share", steps_ms > 0 ? summary.top_level_ms / steps_ms : 0.0}};
  if (source.unprofiled_step_ms > 0) {
    out["unprofiled_step_ms"] = source.unprofiled_step_ms;
    out["profiler_overhead"] = source.step_ms / source.unprofiled_step_ms - 1;
  }
  out["rows"] = std::move(rows);
  return out.dump();
}

OpProfileSummary summarize(ops::OpProfiler& profiler) {
  std::map<std::pair<std::string, std::string>, OpProfileRow> by_key;
  OpProfileSummary s;
  for (const ops::OpEvent& e : profiler.events()) {
    const double ms = profiler.device_ms(e);
    OpProfileRow& r = by_key[{e.depth == 0 ? "" : e.parent, e.name}];
    if (r.calls == 0) {
      r.name = e.name;
      r.parent = e.depth == 0 ? "" : e.parent;
      r.min_ms = std::numeric_limits<double>::infinity();
    }
    ++r.calls;
    r.total_ms += ms;
    r.min_ms = std::min(r.min_ms, ms);
    r.max_ms = std::max(r.max_ms, ms);
    if (e.depth == 0) s.top_level_ms += ms;
  }
  std::vector<OpProfileRow> top, inner;
  for (auto& [key, row] : by_key) (row.parent.empty() ? top : inner).push_back(row);
  auto by_total = [](const OpProfileRow& a, const OpProfileRow& b) {
    return a.total_ms > b.total_ms;
  };
  std::sort(top.begin(), top.end(), by_total);
  std::sort(inner.begin(), inner.end(), by_total);
  for (const OpProfileRow& t : top) {
    s.rows.push_back(t);
    for (const OpProfileRow& i : inner)
      if (i.parent == t.name) s.rows.push_back(i);
  }
  for (const OpProfileRow& i : inner)  // inner ops of ops never called at the top level
    if (std::none_of(top.begin(), top.end(),
                     [&](const OpProfileRow& t) { return t.name == i.parent; }))
      s.rows.push_back(i);
  return s;
}

std::string format_table(const OpProfileSummary& summary, double step_ms, int64_t steps) {
  std::string out = fmt::format("{:<34} {:>8} {:>11} {:>10} {:>10} {:>10} {:>7}\n", "op", "calls",
                                "total ms", "mean ms", "min ms", "max ms", "share");
  for (const OpProfileRow& r : summary.rows) {
    const bool inner = !r.parent.empty();
    const std::string name = inner ? "  " + r.name : r.name;
    const double share = summary.top_level_ms > 0 ? 100 * r.total_ms / summary.top_level_ms : 0;
    out +=
        fmt::format("{:<34} {:>8} {:>11.3f} {:>10.4f} {:>10.4f} {:>10.4f} {:>6.1f}%\n", name,
                    r.calls, r.total_ms, r.total_ms / double(r.calls), r.min_ms, r.max_ms, share);
  }
  out += fmt::format("{:<34} {:>8} {:>11.3f}\n", "all ops (top level)", "", summary.top_level_ms);
  if (steps > 0 && step_ms > 0)
    out += fmt::format(
        "{} steps of {:.3f} ms measured: the ops account for {:.1f}% of the step time (the rest "
        "is time between ops: the host, the loader, waits)\n",
        steps, step_ms, 100 * summary.top_level_ms / (step_ms * double(steps)));
  return out;
}

std::string chrome_trace_json(ops::OpProfiler& profiler) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 1},
                    {"args", {{"name", "host (ops issued)"}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"tid", 2},
                    {"args", {{"name", profiler.clock().device().str() + " (ops run)"}}}});
  for (const ops::OpEvent& e : profiler.events()) {
    const std::string cat = e.depth == 0 ? "op" : std::string("inner op of ") + e.parent;
    events.push_back({{"name", e.name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", e.host_start_us},
                      {"dur", e.host_end_us - e.host_start_us}});
    events.push_back({{"name", e.name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 2},
                      {"ts", 1000 * profiler.device_offset_ms(e.mark_begin)},
                      {"dur", 1000 * profiler.device_ms(e)}});
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace hg::obs
