// `hourglass report RUN_DIR` end to end: a real short training run (with a budget, so the ledger
// has a limit, and a phase) and a profile saved as RUN_DIR/profile.json give a report with every
// section, the ledger's sessions with their phase and stop reason;
// --json prints the path and the chart count; only report.html is added to the run directory;
// --out writes elsewhere and adds nothing; a missing or metric-less directory exits 2 naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "support/run_binary.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    names.insert(fs::relative(e.path(), dir).string());
  return names;
}

// 512 synthetic images in batches of 64: 8 steps an epoch, 16 in the run.
const std::string kTrainArgs =
    " --no-progress --set data.dataset=synthetic --set data.synthetic.train_size=512"
    " --set data.synthetic.test_size=128 --set train.epochs=2 --set train.batch_size=64"
    " --set metrics.every_steps=2 --set checkpoint.every_steps=5"
    " --set monitor.every_seconds=0.1 --budget 2h";

TEST(ReportCli, AReportOfARealRunHasEverySectionAndAddsOnlyItself) {
  const std::string dir = test::fresh_temp_dir("report_cli") + "/run";
  const test::RunResult trained =
      test::run_hourglass("train " HG_SOURCE_DIR "/configs/quickstart.toml --run-dir " + dir +
                          kTrainArgs + " --phase prototype");
  ASSERT_EQ(trained.code, 0) << trained.output;
  // Two more sessions in the ledger, as a run stopped by its budget and a killed one leave them.
  {
    nlohmann::json ledger = nlohmann::json::parse(test::read_file(dir + "/budget.json"));
    ASSERT_EQ(ledger["sessions"].size(), 1u) << ledger.dump();
    nlohmann::json stopped = ledger["sessions"][0], killed = ledger["sessions"][0];
    stopped["id"] = "stopped";
    stopped["phase"] = "full";
    stopped["stop_reason"] = "the budget";
    killed["id"] = "killed";
    killed["closed"] = false;
    ledger["sessions"].push_back(stopped);
    ledger["sessions"].push_back(killed);
    std::ofstream(dir + "/budget.json") << ledger.dump(2);
  }
  // The profile, saved as the report reads it (`hourglass profile ... --json > profile.json`).
  const test::SplitRunResult profiled =
      test::run_hourglass_split("profile " + dir + "/config.toml --steps 2 --warmup 0 --json");
  ASSERT_EQ(profiled.code, 0) << profiled.err;
  std::ofstream(dir + "/profile.json") << profiled.out;
  const std::set<std::string> before = listing(dir);

  const test::SplitRunResult r = test::run_hourglass_split("report " + dir + " --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["report"], dir + "/report.html");
  EXPECT_GE(j["charts"].get<int>(), 8) << r.out;
  std::set<std::string> after = listing(dir);
  EXPECT_EQ(after.erase("report.html"), 1u);
  EXPECT_EQ(after, before) << "report wrote something besides report.html";

  const std::string html = test::read_file(dir + "/report.html");
  size_t svgs = 0;
  for (size_t at = html.find("<svg class=\"chart\""); at != std::string::npos;
       at = html.find("<svg class=\"chart\"", at + 1))
    ++svgs;
  EXPECT_EQ(int(svgs), j["charts"].get<int>());
  for (const char* part :
       {"data-chart=\"loss\"", "data-chart=\"accuracy\"", "data-chart=\"throughput\"",
        "data-chart=\"budget\"", "data-chart=\"checkpoints\"",
        // The 2-hour budget dwarfs a run of seconds: named in the title, not drawn as a line.
        "Budget burn-down (limit 120 device-minutes, off the scale)", "Op profile",
        "conv2d_backward", "step-000000016.safetensors", "[optim]", "budget.json"})
    EXPECT_NE(html.find(part), std::string::npos) << part;
  // The ledger table's phase and stop-reason cells hold what the ledger records.
  for (const char* cells :
       {"<td class=\"text\">prototype</td><td class=\"text\">none (not stopped early)</td>",
        "<td class=\"text\">full</td><td class=\"text\">the budget</td>",
        "<td class=\"text\">prototype</td><td class=\"text\">not closed: still running, or the "
        "process died</td>"})
    EXPECT_NE(html.find(cells), std::string::npos) << cells;

  // A second report replaces the first; --out writes elsewhere and leaves the run dir as it was.
  ASSERT_EQ(test::run_hourglass("report " + dir).code, 0);
  const std::string elsewhere = fs::path(dir).parent_path().string() + "/elsewhere.html";
  const std::set<std::string> with_report = listing(dir);
  const test::RunResult out = test::run_hourglass("report " + dir + " --out " + elsewhere);
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_NE(out.output.find("report: " + elsewhere), std::string::npos) << out.output;
  EXPECT_TRUE(fs::exists(elsewhere));
  EXPECT_EQ(listing(dir), with_report);
}

TEST(ReportCli, APartialLineOrABadLedgerIsWarnedAboutAndTheReportIsWritten) {
  const std::string dir = test::fresh_temp_dir("report_cli_partial") + "/run";
  ASSERT_EQ(test::run_hourglass("train " HG_SOURCE_DIR "/configs/quickstart.toml --run-dir " + dir +
                                kTrainArgs + " --set train.epochs=1")
                .code,
            0);
  {
    std::ofstream f(dir + "/metrics.jsonl", std::ios::app);
    f << "{\"epoch\": 2, \"train_";
  }
  const test::SplitRunResult r = test::run_hourglass_split("report " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("metrics.jsonl line 2: not a JSON object"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir + "/report.html"));
  // A ledger that cannot be read leaves the sessions out, named; the report is still written.
  std::ofstream(dir + "/budget.json") << "{";
  const test::SplitRunResult bad_ledger = test::run_hourglass_split("report " + dir);
  ASSERT_EQ(bad_ledger.code, 0) << bad_ledger.err;
  EXPECT_NE(bad_ledger.err.find("budget ledger " + dir + "/budget.json is corrupted"),
            std::string::npos)
      << bad_ledger.err;
  EXPECT_NE(test::read_file(dir + "/report.html").find("the budget sessions are left out"),
            std::string::npos);
  // No ledger at all: a note, and the burn-down still drawn from the step records.
  fs::remove(dir + "/budget.json");
  const test::SplitRunResult no_ledger = test::run_hourglass_split("report " + dir);
  ASSERT_EQ(no_ledger.code, 0) << no_ledger.err;
  EXPECT_NE(no_ledger.err.find("no budget ledger at " + dir + "/budget.json"), std::string::npos)
      << no_ledger.err;
  EXPECT_NE(test::read_file(dir + "/report.html").find("data-chart=\"budget\""), std::string::npos);
}

TEST(ReportCli, AMissingOrEmptyRunDirectoryExits2NamingIt) {
  const std::string base = test::fresh_temp_dir("report_cli_errors");
  const test::RunResult missing = test::run_hourglass("report " + base + "/no-such-run");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find(base + "/no-such-run does not exist"), std::string::npos)
      << missing.output;
  const test::RunResult empty = test::run_hourglass("report " + base);
  EXPECT_EQ(empty.code, 2) << empty.output;
  EXPECT_NE(empty.output.find(base + " holds no metrics"), std::string::npos) << empty.output;
  EXPECT_NE(empty.output.find("metrics.jsonl"), std::string::npos) << empty.output;
  EXPECT_FALSE(fs::exists(base + "/report.html"));
}

}  // namespace
}  // namespace hg
