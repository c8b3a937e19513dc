// hourglass report RUN_DIR [--out PATH] [--json]: writes a self-contained HTML report of a run
// (obs/report_html.h) from its directory (obs/run_report.h) and its budget ledger
// (train/run/budget.h: config.toml's budget.ledger, else RUN_DIR/budget.json). Nothing is written
// into the run directory but the report (by default RUN_DIR/report.html, replaced atomically).
// Lines that cannot be read are skipped and named in a warning and in the report's notes.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "hourglass/base/atomic_file.h"
#include "hourglass/base/config.h"
#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/log.h"
#include "hourglass/base/plural.h"
#include "hourglass/obs/report_html.h"
#include "hourglass/obs/run_report.h"
#include "hourglass/train/run/budget.h"

namespace hg::cli {

namespace {

// "2026-12-01T18:41:48Z" (the ledger's times) as Unix seconds; 0 when it is not that format.
double parse_utc(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return 0;
  return double(timegm(&tm));
}

// The run's ledger as the report shows it, or nullopt (with a note) when there is none.
std::optional<obs::BudgetInfo> read_budget(obs::RunReport& report) {
  std::string path = report.run_dir + "/budget.json";
  if (!report.config_text.empty()) {
    try {
      const std::string configured =
          Config::parse(report.config_text, report.run_dir + "/config.toml")
              .get_string("budget.ledger", "");
      if (!configured.empty()) path = configured;
    } catch (const Error&) {  // read_run_report has noted the config already
    }
  }
  if (file_kind(path).empty()) {
    report.notes.push_back("no budget ledger at " + path + ": the sessions are not listed");
    return std::nullopt;
  }
  try {
    const train::LedgerData data = train::read_ledger(path);
    obs::BudgetInfo info;
    info.path = path;
    info.limit_device_hours = data.budget_device_hours;
    info.limit_usd = data.budget_usd;
    for (const train::LedgerSession& s : data.sessions)
      info.sessions.push_back({parse_utc(s.started), parse_utc(s.ended), s.device_seconds,
                               s.price_per_hour, s.devices, s.phase, s.stop_reason, s.closed});
    return info;
  } catch (const Error& e) {
    report.notes.push_back(e.message() + ": the budget sessions are left out");
    return std::nullopt;
  }
}

}  // namespace

Runner add_report(CLI::App& app) {
  struct Args {
    std::string run_dir;
    std::string out;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "report",
      "Write a self-contained HTML report of a run directory: loss and accuracy curves, "
      "throughput, device utilisation and memory, budget burn-down, checkpoints, the op profile "
      "(RUN_DIR/profile.json) and the config.");
  sub->add_option("run_dir", a->run_dir, "the run directory (train --run-dir)")->required();
  sub->add_option("--out", a->out, "where to write the report (default RUN_DIR/report.html)");
  sub->add_flag("--json", a->json, "print {\"report\": path, \"charts\": N} as one JSON object");
  return [a] {
    obs::RunReport report = obs::read_run_report(a->run_dir);
    report.budget = read_budget(report);
    for (const std::string& note : report.notes) HG_LOG_WARN("report: {}", note);
    const obs::ReportHtml page = obs::render_report_html(report);
    const std::string out = a->out.empty() ? a->run_dir + "/report.html" : a->out;
    write_file_atomic(out, page.html);
    if (a->json) {
      const nlohmann::json j{{"report", out}, {"charts", page.charts}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("report: %s (%s)\n", out.c_str(), plural(page.charts, "chart").c_str());
    }
    return 0;
  };
}

}  // namespace hg::cli
