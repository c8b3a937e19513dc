// End-to-end tests of `hourglass plan` with a given throughput (no calibration, so the table
// is deterministic), and its one-line errors for bad flags.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "support/run_binary.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace hg {
namespace {

namespace fs = std::filesystem;

const std::string kConfigs = HG_SOURCE_DIR "/configs";

using Result = hg::test::RunResult;

Result run(const std::string& args) { return hg::test::run_hourglass(args); }

// The table line of `platform` in the output.
std::string row(const std::string& output, const std::string& platform) {
  size_t pos = 0;
  while ((pos = output.find(platform + " ", pos)) != std::string::npos) {
    if (pos == 0 || output[pos - 1] == '\n')
      return output.substr(pos, output.find('\n', pos) - pos);
    ++pos;
  }
  return "";
}

TEST(CliPlan, QuickstartOnAGivenThroughputAgainstTheExamplePrices) {
  const Result r = run("plan " + kConfigs +
                       "/quickstart.toml --images-per-s 5000 --budget 1h "
                       "--price-table " +
                       kConfigs + "/prices.example.toml");
  ASSERT_EQ(r.code, 0) << r.output;
  // The summary: Fashion-MNIST sizes, 469 steps of 128, 4 epochs, the given throughput.
  EXPECT_NE(r.output.find("60000 training / 10000 test images"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("469 steps per epoch"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("5000 images/s training (given)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("budget: 1.00 device-hours"), std::string::npos) << r.output;
  // The table: header and one row per platform of the price table.
  EXPECT_NE(r.output.find("platform"), std::string::npos);
  EXPECT_NE(r.output.find("fits budget"), std::string::npos);
  for (const char* p : {"this-machine", "cpu-cloud-16c", "h200-cloud", "mi300x-cloud"}) {
    const std::string line = row(r.output, p);
    ASSERT_FALSE(line.empty()) << p << " missing in:\n" << r.output;
    EXPECT_EQ(line.substr(line.size() - 3), "yes") << line;
  }
  // This machine: 12.67 s per epoch, 4 epochs in 0:51, free, 274 epochs in the hour.
  const std::string here = row(r.output, "this-machine");
  EXPECT_NE(here.find("0:51"), std::string::npos) << here;
  EXPECT_NE(here.find("$0.00"), std::string::npos) << here;
  EXPECT_NE(here.find(" 274 "), std::string::npos) << here;
  EXPECT_NE(row(r.output, "h200-cloud").find("$3.50"), std::string::npos);
}

TEST(CliPlan, TooSmallABudgetDoesNotFit) {
  // 2m10s with the default 2m reserve leaves 10 s: not the 50.67 s of the 4 epochs.
  const Result r = run("plan " + kConfigs + "/quickstart.toml --images-per-s 5000 --budget 2m10s");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string here = row(r.output, "this-machine");  // no table: this machine only
  ASSERT_FALSE(here.empty()) << r.output;
  EXPECT_EQ(here.substr(here.size() - 2), "no") << here;
}

TEST(CliPlan, UsesAndSubtractsASharedLedger) {
  const fs::path dir = fs::path(::testing::TempDir()) / "hourglass_cli_plan_ledger";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ledger = (dir / "ledger.json").string();
  // 0.5 device-hours spent of a 1-hour budget recorded in the ledger.
  std::ofstream(ledger) << R"({"format": "hourglass-budget-ledger", "version": 1,
  "budget": {"device_hours": 1, "usd": 0},
  "sessions": [{"id": "s1", "run": "proto", "phase": "prototype", "started": "2025-01-01T00:00:00Z",
                "ended": "2025-01-01T00:30:00Z", "closed": true, "devices": 1, "price_per_hour": 0,
                "wall_seconds": 1800, "device_seconds": 1800}]})";
  const Result r =
      run("plan " + kConfigs + "/quickstart.toml --images-per-s 5000 --ledger " + ledger);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("0.50 device-hours"), std::string::npos) << r.output;
  // (1800 - 120) / 12.667 = 132 epochs.
  EXPECT_NE(row(r.output, "this-machine").find(" 132 "), std::string::npos) << r.output;
}

TEST(CliPlan, BadInputIsOneLineNamingTheFlag) {
  const std::string base = "plan " + kConfigs + "/quickstart.toml --images-per-s 5000 ";
  struct Case {
    std::string args, needle;
  };
  for (const Case& c : {Case{"--budget 2x", "--budget"}, Case{"--budget-usd abc", "--budget-usd"},
                        Case{"--price-table /nonexistent/p.toml", "/nonexistent/p.toml"},
                        Case{"--set budget.hours=-2", "budget.hours"}}) {
    const Result r = run(base + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    std::string last = r.output;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
    EXPECT_EQ(last.rfind("hourglass: error: ", 0), 0u) << r.output;
    EXPECT_NE(last.find(c.needle), std::string::npos) << c.needle << " not in: " << last;
  }
}

}  // namespace
}  // namespace hg
