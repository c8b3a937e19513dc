#include "hourglass/obs/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <tuple>
#include <vector>

#include "hourglass/obs/report_check_script.h"
#include "hourglass/obs/svg_chart.h"

namespace hg::obs {

namespace {

// The report's palette (our own constants: no color ever comes from a file).
constexpr const char* kBlue = "#1f77b4";
constexpr const char* kOrange = "#ff7f0e";
constexpr const char* kGreen = "#2ca02c";
constexpr const char* kRed = "#d62728";
constexpr const char* kPurple = "#9467bd";
constexpr const char* kGray = "#7f7f7f";

constexpr const char* kStyle = R"CSS(
body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td.text, th.text { text-align: left; }
pre { background: #f7f7f7; padding: 10px; overflow-x: auto; font-size: 0.85em; }
.note { color: #8a5a00; } .charts { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
svg.chart { width: 100%; height: auto; background: #fff; border: 1px solid #e4e4e4; }
svg.chart .grid { stroke: #eee; } svg.chart .frame { fill: none; stroke: #999; }
svg.chart text { font-size: 12px; fill: #444; } svg.chart .title { font-size: 14px; font-weight: 600; }
)CSS";

bool finite(double v) { return std::isfinite(v); }

std::string utc(double unix_seconds) {
  if (!(unix_seconds > 0)) return "";
  const std::time_t t = std::time_t(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string fixed(double v, int digits) {
  return finite(v) ? fmt::format("{:.{}f}", v, digits) : std::string("–");
}

// Accumulates the page and counts its charts.
class Page {
 public:
  void add(const std::string& s) { html_ += s; }
  void note(const std::string& text) {
    html_ += "<p class=\"note\">" + html_escape(text) + "</p>\n";
  }
  // The chart, or a note saying why it is missing.
  void chart(const ChartSpec& spec, const std::string& missing) {
    if (chart_points(spec) == 0) {
      html_ += "<div><p class=\"note\">" + html_escape(spec.title) + ": " + html_escape(missing) +
               "</p></div>\n";
      return;
    }
    html_ += "<div>" + render_svg_chart(spec) + "</div>\n";
    ++charts_;
  }
  int charts() const { return charts_; }
  std::string& html() { return html_; }

 private:
  std::string html_;
  int charts_ = 0;
};

// (x, y) of two fields of every record that has both; `x_scale`/`y_scale` multiply.
std::vector<std::pair<double, double>> series_of(const std::vector<Record>& records,
                                                 const std::string& x, const std::string& y,
                                                 double y_scale = 1, double x_offset = 0,
                                                 double x_scale = 1) {
  std::vector<std::pair<double, double>> out;
  for (const Record& r : records) {
    const double xv = field_of(r, x), yv = field_of(r, y);
    if (finite(xv) && finite(yv)) out.emplace_back((xv - x_offset) * x_scale, yv * y_scale);
  }
  return out;
}

bool any_field(const std::vector<Record>& records, const std::string& name) {
  return std::any_of(records.begin(), records.end(),
                     [&](const Record& r) { return finite(field_of(r, name)); });
}

// The earliest wall-clock time the run's files record: the charts' time axes start there.
double start_time(const RunReport& r) {
  double t0 = std::numeric_limits<double>::infinity();
  for (const Record& s : r.steps) t0 = std::min(t0, field_of(s, "time") - field_of(s, "elapsed_s"));
  for (const Record& m : r.monitor) t0 = std::min(t0, field_of(m, "unix_time"));
  if (r.budget)
    for (const BudgetSession& s : r.budget->sessions)
      if (s.start_unix > 0) t0 = std::min(t0, s.start_unix);
  if (!finite(t0))
    for (const CheckpointEntry& c : r.checkpoints) t0 = std::min(t0, c.mtime_unix);
  return finite(t0) ? t0 : 0;
}

// The unit of every "since the run started" axis: one for the whole page, chosen by the span of
// what the run's files record (a projection past it is drawn in the same unit).
AxisUnit run_time_unit(const RunReport& r, double t0) {
  double end = t0;
  for (const Record& s : r.steps) end = std::max(end, field_of(s, "time"));
  for (const Record& m : r.monitor) end = std::max(end, field_of(m, "unix_time"));
  if (r.budget)
    for (const BudgetSession& s : r.budget->sessions) end = std::max(end, s.end_unix);
  for (const CheckpointEntry& c : r.checkpoints) end = std::max(end, c.mtime_unix);
  return time_unit_for(end - t0);
}

std::string time_label(const AxisUnit& u) { return "time since the run started (" + u.name + ")"; }

// `v` to about 3 significant digits, as the axes print numbers (1k, 60, 0.0123; never 1e+03).
std::string compact(double v) {
  if (!finite(v) || v == 0) return tick_label(v, 1);
  return tick_label(v, std::pow(10.0, std::floor(std::log10(std::abs(v))) - 2));
}

// The largest value of a field over the records (NaN when none has it).
double max_field(const std::vector<Record>& records, const std::string& name) {
  double top = std::nan("");
  for (const Record& r : records)
    if (const double v = field_of(r, name); finite(v) && !(v <= top)) top = v;
  return top;
}

// A reinforcement-learning run (metrics.jsonl lines with "episodic_return", one per iteration):
// charted against its environment steps.
bool is_rl_run(const RunReport& r) { return any_field(r.epochs, "episodic_return"); }

void summary_section(const RunReport& r, Page& p) {
  const Record* last = r.epochs.empty() ? nullptr : &r.epochs.back();
  double wall = 0, best = std::nan("");
  const std::string acc_key = any_field(r.epochs, "val_acc") ? "val_acc" : "test_acc";
  for (const Record& e : r.epochs) {
    if (finite(field_of(e, "epoch_seconds"))) wall += field_of(e, "epoch_seconds");
    const double a = field_of(e, acc_key);
    if (finite(a) && !(a <= best)) best = a;
  }
  auto row = [&](const std::string& name, const std::string& value) {
    p.add("<tr><th class=\"text\">" + html_escape(name) + "</th><td class=\"text\">" +
          html_escape(value) + "</td></tr>\n");
  };
  p.add("<table>\n");
  row("run directory", r.run_dir);
  row(is_rl_run(r) ? "iterations" : "epochs",
      r.planned_epochs > 0 ? fmt::format("{} of {}", r.epochs.size(), r.planned_epochs)
                           : fmt::format("{}", r.epochs.size()));
  if (!r.steps.empty()) row("last step record", fixed(field_of(r.steps.back(), "step"), 0));
  if (last && is_rl_run(r)) {
    row("environment steps", fixed(field_of(*last, "global_step"), 0));
    double best_return = std::nan("");
    for (const Record& e : r.epochs)
      if (const double v = field_of(e, "episodic_return"); finite(v) && !(v <= best_return))
        best_return = v;
    const Record* with_episodes = nullptr;
    for (const Record& e : r.epochs)
      if (finite(field_of(e, "episodic_return"))) with_episodes = &e;
    if (with_episodes)
      row("last mean episodic return", fixed(field_of(*with_episodes, "episodic_return"), 1));
    row("best mean episodic return", fixed(best_return, 1));
  } else if (last) {
    row("last train loss", fixed(field_of(*last, "train_loss"), 4));
    if (finite(field_of(*last, "val_acc")))
      row("last validation accuracy", fixed(100 * field_of(*last, "val_acc"), 2) + "%");
    row("last test accuracy", fixed(100 * field_of(*last, "test_acc"), 2) + "%");
    row(acc_key == "val_acc" ? "best validation accuracy" : "best test accuracy",
        fixed(100 * best, 2) + "%");
    row("training time (epochs)", fixed(wall, 1) + " s");
  }
  if (!r.gpu_name.empty()) row("GPU", r.gpu_name);
  row("checkpoints", fmt::format("{}", r.checkpoints.size()));
  row("final weights", r.has_final ? "final.safetensors" : "none yet (the run has not finished)");
  p.add("</table>\n");
}

void curves_section(const RunReport& r, Page& p) {
  p.add("<h2>Loss and accuracy</h2>\n<div class=\"charts\">\n");
  ChartSpec loss{"loss", "Loss per epoch", "epoch", "loss", {}, false, AxisKind::Count};
  ChartSpec acc{"accuracy", "Accuracy per epoch", "epoch", "accuracy (%)", {},
                false,      AxisKind::Count};
  const std::pair<const char*, const char*> colors[] = {
      {"train", kBlue}, {"val", kGreen}, {"test", kOrange}};
  for (const auto& [split, color] : colors) {
    loss.series.push_back({std::string(split) + " loss", color, SeriesStyle::Line,
                           series_of(r.epochs, "epoch", std::string(split) + "_loss")});
    acc.series.push_back({std::string(split) + " accuracy", color, SeriesStyle::Line,
                          series_of(r.epochs, "epoch", std::string(split) + "_acc", 100)});
  }
  p.chart(loss, "no epoch records in metrics.jsonl yet");
  p.chart(acc, "no epoch records in metrics.jsonl yet");
  ChartSpec step_loss{"step_loss", "Training loss per step", "optimizer step", "loss", {},
                      false,       AxisKind::Count};
  step_loss.series.push_back({"loss (the step's last micro-batch)", kBlue, SeriesStyle::Line,
                              series_of(r.steps, "step", "loss")});
  p.chart(step_loss, "no step records (steps.jsonl)");
  ChartSpec lr{"lr", "Learning rate", "optimizer step", "learning rate", {}, true, AxisKind::Count};
  lr.series.push_back({"lr", kPurple, SeriesStyle::Line, series_of(r.steps, "step", "lr")});
  p.chart(lr, "no step records (steps.jsonl)");
  p.add("</div>\n");
}

void rl_section(const RunReport& r, Page& p) {
  p.add("<h2>Episodes and losses</h2>\n<div class=\"charts\">\n");
  const std::string x = "environment steps";
  const char* missing = "no iteration records in metrics.jsonl yet";
  auto chart = [&](const char* id, const char* title, const char* y_label, bool from_zero,
                   std::vector<std::tuple<const char*, const char*, const char*>> fields) {
    ChartSpec c{id, title, x, y_label, {}, from_zero, AxisKind::Count};
    for (const auto& [label, color, field] : fields)
      c.series.push_back(
          {label, color, SeriesStyle::Line, series_of(r.epochs, "global_step", field)});
    p.chart(c, missing);
  };
  chart("return", "Episodic return (episodes ended in each iteration)", "return", false,
        {{"mean return", kBlue, "episodic_return"}});
  chart("episode_length", "Episode length", "steps", true,
        {{"mean length", kGreen, "episode_length"}});
  chart("rl_losses", "Losses (the iteration's last minibatch)", "loss", false,
        {{"policy loss", kBlue, "policy_loss"}, {"value loss", kOrange, "value_loss"}});
  chart("entropy", "Policy entropy", "nats", true, {{"entropy", kPurple, "entropy"}});
  chart("kl", "Approximate KL and clip fraction", "value", true,
        {{"approx KL", kBlue, "approx_kl"}, {"clip fraction", kOrange, "clip_fraction"}});
  chart("env_rate", "Environment steps per second", "steps/s", true,
        {{"steps/s", kGreen, "steps_per_s"}});
  p.add("</div>\n");
}

void throughput_section(const RunReport& r, double t0, const AxisUnit& tu, Page& p) {
  p.add("<h2>Throughput and devices</h2>\n<div class=\"charts\">\n");
  const double per_unit = 1 / tu.divisor;
  ChartSpec tp{"throughput", "Throughput", time_label(tu), "images/s", {}, true};
  tp.series.push_back({"images/s (step records)", kBlue, SeriesStyle::Line,
                       series_of(r.steps, "time", "images_per_s", 1, t0, per_unit)});
  p.chart(tp, "no step records (steps.jsonl)");
  const bool gpu = any_field(r.monitor, "gpu_util_pct");
  auto monitor = [&](const std::string& field, double scale = 1) {
    return series_of(r.monitor, "unix_time", field, scale, t0, per_unit);
  };
  // Memory charts are scaled to the memory drawn; the device's (or host's) total is named in
  // the title, not drawn: a line at 141 GB would flatten a run's few GB along the bottom.
  auto of_total = [&](std::string title, const char* field) {
    const double total = max_field(r.monitor, field);
    if (finite(total) && total > 0) title += " (of " + format_mib(total) + ")";
    return title;
  };
  if (gpu) {
    ChartSpec util{"gpu_util", "GPU utilisation", time_label(tu), "%", {}, true};
    util.series.push_back({"GPU busy", kGreen, SeriesStyle::Line, monitor("gpu_util_pct")});
    util.series.push_back(
        {"data-wait share", kRed, SeriesStyle::Line, monitor("data_wait_share", 100)});
    p.chart(util, "no monitor.csv rows");
    ChartSpec mem{"gpu_memory",
                  of_total("GPU memory", "gpu_mem_total_mib"),
                  time_label(tu),
                  "memory",
                  {},
                  true,
                  AxisKind::Number,
                  AxisKind::MiB};
    mem.series.push_back({"used", kBlue, SeriesStyle::Line, monitor("gpu_mem_used_mib")});
    mem.series.push_back({"allocator peak (step records)", kOrange, SeriesStyle::Line,
                          series_of(r.steps, "time", "peak_memory_mib", 1, t0, per_unit)});
    p.chart(mem, "no monitor.csv rows");
  } else {
    ChartSpec cpu{"host_cpu", "Host CPU", time_label(tu), "%", {}, true};
    cpu.series.push_back({"host CPU busy", kGreen, SeriesStyle::Line, monitor("host_cpu_pct")});
    cpu.series.push_back(
        {"data-wait share", kRed, SeriesStyle::Line, monitor("data_wait_share", 100)});
    p.chart(cpu, "no monitor.csv rows");
    ChartSpec mem{"memory",
                  of_total("Memory", "host_mem_total_mib"),
                  time_label(tu),
                  "memory",
                  {},
                  true,
                  AxisKind::Number,
                  AxisKind::MiB};
    mem.series.push_back(
        {"process resident", kBlue, SeriesStyle::Line, monitor("process_rss_mib")});
    mem.series.push_back({"allocator peak (step records)", kOrange, SeriesStyle::Line,
                          series_of(r.steps, "time", "peak_memory_mib", 1, t0, per_unit)});
    p.chart(mem, "no monitor.csv rows");
  }
  p.add("</div>\n");
  if (!gpu && !r.monitor.empty())
    p.note(
        "monitor.csv has no GPU readings (a CPU run, or no NVML / AMD SMI / ROCm SMI): the host's "
        "CPU and the process's memory are shown instead.");
}

void budget_section(const RunReport& r, double t0, const AxisUnit& tu, Page& p) {
  p.add("<h2>Budget</h2>\n");
  // Spent device-hours over time: the step records' ledger totals, else the ledger's sessions.
  std::vector<std::pair<double, double>> spent =
      series_of(r.steps, "time", "budget_device_hours", 1, t0, 1 / tu.divisor);
  if (spent.empty() && r.budget) {
    double total = 0;
    for (const BudgetSession& s : r.budget->sessions) {
      spent.emplace_back((s.start_unix - t0) / tu.divisor, total);
      total += s.device_seconds / 3600.0;
      spent.emplace_back((s.end_unix - t0) / tu.divisor, total);
    }
  }
  if (spent.empty()) {
    p.note("No budget records: the run has no step records with budget fields and no ledger.");
    return;
  }
  double limit = 0;
  if (r.budget) {
    limit = r.budget->limit_device_hours;
    const double price = r.budget->sessions.empty() ? 0 : r.budget->sessions.back().price_per_hour;
    if (r.budget->limit_usd > 0 && price > 0) {
      const double usd_hours = r.budget->limit_usd / price;
      limit = limit > 0 ? std::min(limit, usd_hours) : usd_hours;
    }
  }
  // The projection: the epochs left at the recent epoch time, from the last record.
  std::vector<std::pair<double, double>> projection;
  std::string projection_note;
  const int64_t left = r.planned_epochs - int64_t(r.epochs.size());
  double epoch_seconds = 0;
  int counted = 0;
  const char* seconds_key = is_rl_run(r) ? "iteration_seconds" : "epoch_seconds";
  for (size_t i = r.epochs.size(); i-- > 0 && counted < 3;) {
    const double s = field_of(r.epochs[i], seconds_key);
    if (finite(s) && s > 0) {
      epoch_seconds += s;
      ++counted;
    }
  }
  if (counted > 0) epoch_seconds /= counted;
  const int devices =
      r.budget && !r.budget->sessions.empty() ? r.budget->sessions.back().devices : 1;
  if (r.planned_epochs > 0 && left > 0 && epoch_seconds > 0) {
    // Time already spent in the epoch in progress: since the last step record of a finished
    // epoch (within metrics.every_steps steps of its end), at most one epoch.
    double into_epoch = 0;
    const double last_time = r.steps.empty() ? NAN : field_of(r.steps.back(), "time");
    for (size_t i = r.steps.size(); i-- > 0;)
      if (field_of(r.steps[i], "epoch") <= double(r.epochs.size())) {
        into_epoch = std::clamp(last_time - field_of(r.steps[i], "time"), 0.0, epoch_seconds);
        break;
      }
    if (!finite(into_epoch)) into_epoch = 0;
    const double seconds = double(left) * epoch_seconds - into_epoch;
    projection = {spent.back(),
                  {spent.back().first + seconds / tu.divisor,
                   spent.back().second + seconds * devices / 3600.0}};
    projection_note = fmt::format(
        "Projection: the {} epoch(s) left at {:.1f} s each (the mean of the last {}; {:.0f} s of "
        "the first already done), on {} device(s), from the last record: ",
        left, epoch_seconds, counted, into_epoch, devices);
  } else if (r.planned_epochs > 0 && left <= 0) {
    projection_note = "The run has trained all its epochs: nothing left to project.";
  } else {
    projection_note = "No projection: the planned epochs or the epoch time are unknown.";
  }
  // The limit is drawn as a line when it is near the data; far above it (a short run of a long
  // budget), a line would flatten what was spent along the bottom, so the title names it instead.
  double top = projection.empty() ? spent.back().second : projection.back().second;
  for (const auto& pt : spent) top = std::max(top, pt.second);
  const bool draw_limit = limit > 0 && limit <= 3 * top;
  if (draw_limit) top = std::max(top, limit);
  // Small runs read better in device-minutes.
  const bool minutes = top < 0.5;
  const double unit = minutes ? 60.0 : 1.0;
  const char* unit_name = minutes ? "device-minutes" : "device-hours";
  auto scaled = [&](std::vector<std::pair<double, double>> pts) {
    for (auto& pt : pts) pt.second *= unit;
    return pts;
  };
  if (!projection.empty())
    projection_note += fmt::format(
        "{} {} at the end{}.", compact(projection.back().second * unit), unit_name,
        limit > 0 ? fmt::format(", against a limit of {}", compact(limit * unit)) : std::string());
  std::string title = "Budget burn-down";
  if (limit > 0 && !draw_limit)
    title += fmt::format(" (limit {} {}, off the scale)", compact(limit * unit), unit_name);
  ChartSpec chart{"budget", title, time_label(tu), std::string(unit_name) + " spent", {}, true};
  chart.series.push_back({"spent", kBlue, SeriesStyle::Line, scaled(spent)});
  if (!projection.empty())
    chart.series.push_back({"projected", kOrange, SeriesStyle::Dashed, scaled(projection)});
  if (draw_limit) {
    const double x_end = projection.empty() ? spent.back().first : projection.back().first;
    chart.series.push_back({"limit", kRed, SeriesStyle::Dashed,
                            scaled({{spent.front().first, limit}, {x_end, limit}})});
  }
  p.add("<div class=\"charts\">\n");
  p.chart(chart, "no budget records");
  p.add("</div>\n");
  p.note(projection_note);
  if (!r.budget) {
    p.note("No budget ledger was found (budget.json): the sessions are not listed.");
    return;
  }
  if (limit <= 0) p.note("The ledger records no budget limit.");
  p.add("<p>Ledger " + html_escape(r.budget->path) +
        ":</p>\n<table>\n<tr><th>session</th>"
        "<th class=\"text\">started</th><th class=\"text\">ended</th><th>devices</th>"
        "<th>device-hours</th><th>USD</th><th class=\"text\">phase</th>"
        "<th class=\"text\">stop reason</th></tr>\n");
  for (size_t i = 0; i < r.budget->sessions.size(); ++i) {
    const BudgetSession& s = r.budget->sessions[i];
    // An empty cell would not tell "none recorded" from "not read".
    const std::string phase = s.phase.empty() ? "none" : s.phase;
    const std::string stop = !s.stop_reason.empty() ? s.stop_reason
                             : s.closed             ? "none (not stopped early)"
                                        : "not closed: still running, or the process died";
    p.add(fmt::format(
        "<tr><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td>{}</td>"
        "<td>{:.4f}</td><td>{:.2f}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>\n",
        i + 1, utc(s.start_unix), utc(s.end_unix), s.devices, s.device_seconds / 3600.0,
        s.device_seconds / 3600.0 * s.price_per_hour, html_escape(phase), html_escape(stop)));
  }
  p.add("</table>\n");
}

void checkpoint_section(const RunReport& r, double t0, const AxisUnit& tu, Page& p) {
  p.add("<h2>Checkpoints</h2>\n");
  ChartSpec chart{"checkpoints", "Checkpoint timeline", time_label(tu), "optimizer step", {},
                  true,          AxisKind::Number,      AxisKind::Count};
  chart.series.push_back({"training progress (step records)", kGray, SeriesStyle::Line,
                          series_of(r.steps, "time", "step", 1, t0, 1 / tu.divisor)});
  std::vector<std::pair<double, double>> marks;
  for (const CheckpointEntry& c : r.checkpoints)
    marks.emplace_back((c.mtime_unix - t0) / tu.divisor, double(c.step));
  chart.series.push_back({"checkpoint written", kRed, SeriesStyle::Markers, marks});
  if (r.checkpoints.empty()) {
    p.note("No checkpoints in checkpoints/.");
    return;
  }
  p.add("<div class=\"charts\">\n");
  p.chart(chart, "no checkpoints");
  p.add(
      "</div>\n<table>\n<tr><th class=\"text\">file</th><th>step</th>"
      "<th class=\"text\">written</th><th>MB</th><th class=\"text\"></th></tr>\n");
  for (const CheckpointEntry& c : r.checkpoints) {
    std::string tags = c.last ? "last" : "";
    if (c.best) tags += tags.empty() ? "best" : ", best";
    p.add(
        fmt::format("<tr><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{}</td>"
                    "<td>{:.1f}</td><td class=\"text\">{}</td></tr>\n",
                    html_escape(c.file), c.step, utc(c.mtime_unix), c.size_mb, tags));
  }
  p.add("</table>\n");
}

void profile_section(const RunReport& r, Page& p) {
  p.add("<h2>Op profile</h2>\n");
  if (!r.profile) {
    p.note(
        "No profile.json: `hourglass profile RUN_DIR/config.toml --json > RUN_DIR/profile.json` "
        "adds one.");
    return;
  }
  const ProfileTable& t = *r.profile;
  p.add(
      fmt::format("<p>{} steps on {}: {:.3f} ms a step, the ops {:.3f} ms in all ({:.1f}% of "
                  "the step time).</p>\n",
                  t.steps, html_escape(t.device), t.step_ms, t.ops_ms, 100 * t.ops_share));
  p.add(
      "<table>\n<tr><th class=\"text\">op</th><th class=\"text\">inside</th><th>calls</th>"
      "<th>total ms</th><th>mean ms</th><th>min ms</th><th>max ms</th><th>share</th></tr>\n");
  for (const ProfileRow& row : t.rows) {
    const double share = t.ops_ms > 0 && row.parent.empty() ? row.total_ms / t.ops_ms : NAN;
    p.add(fmt::format(
        "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td>{}</td><td>{:.3f}</td>"
        "<td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{}</td></tr>\n",
        html_escape(row.op), html_escape(row.parent), row.calls, row.total_ms,
        row.calls > 0 ? row.total_ms / double(row.calls) : 0.0, row.min_ms, row.max_ms,
        finite(share) ? fmt::format("{:.1f}%", 100 * share) : std::string()));
  }
  p.add("</table>\n");
}

}  // namespace

ReportHtml render_report_html(const RunReport& r) {
  Page p;
  const double t0 = start_time(r);
  p.add(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>hourglass "
      "report: " +
      html_escape(r.name) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n");
  p.add("<h1>hourglass report: " + html_escape(r.name) + "</h1>\n");
  if (t0 > 0) p.add("<p>Run started " + utc(t0) + ".</p>\n");
  summary_section(r, p);
  if (!r.notes.empty()) {
    p.add("<h2>Notes</h2>\n<ul>\n");
    for (const std::string& n : r.notes) p.add("<li class=\"note\">" + html_escape(n) + "</li>\n");
    p.add("</ul>\n");
  }
  if (is_rl_run(r))
    rl_section(r, p);
  else
    curves_section(r, p);
  const AxisUnit tu = run_time_unit(r, t0);
  throughput_section(r, t0, tu, p);
  budget_section(r, t0, tu, p);
  checkpoint_section(r, t0, tu, p);
  profile_section(r, p);
  p.add("<h2>Config</h2>\n");
  if (r.config_text.empty()) {
    p.note("No config.toml in the run directory.");
  } else if (!r.config_resolved.empty()) {
    p.add("<p>The resolved settings of config.toml (each float in its shortest exact form):</p>\n");
    p.add("<pre>" + html_escape(r.config_resolved) + "</pre>\n");
  } else {
    p.note("config.toml could not be read as TOML: shown as written.");
    p.add("<pre>" + html_escape(r.config_text) + "</pre>\n");
  }
  p.add(std::string("<script>") + kReportCheckScript + "</script>\n</body>\n</html>\n");
  return {std::move(p.html()), p.charts()};
}

}  // namespace hg::obs
