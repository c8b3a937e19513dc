// A budgeted training run stops with a checkpoint before its budget is spent, and a resumed
// run keeps the ledger's history: the two sessions add up and the budget holds across both.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "support/run_binary.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

using Result = hg::test::RunResult;

Result run(const std::string& args) { return hg::test::run_hourglass(args); }

nlohmann::json ledger(const std::string& dir) {
  std::ifstream f(dir + "/budget.json");
  return nlohmann::json::parse(f);
}

TEST(BudgetRun, StopsWithACheckpointBeforeTheBudgetAndResumesWithTheLedger) {
  const std::string dir = (fs::path(::testing::TempDir()) / "hourglass_budget_run").string();
  fs::remove_all(dir);
  // A synthetic run of ~20 s of steps with a 4 s budget (1 s kept in reserve).
  const std::string train =
      "train " HG_SOURCE_DIR "/configs/quickstart.toml --no-progress --run-dir " + dir +
      " --set data.dataset=synthetic --set data.synthetic.train_size=4096"
      " --set data.synthetic.test_size=256 --set train.epochs=20 --budget-reserve 1s";
  Result first = run(train + " --budget 4s");
  ASSERT_EQ(first.code, 75) << first.output;
  EXPECT_NE(first.output.find("the budget"), std::string::npos) << first.output;
  nlohmann::json l1 = ledger(dir);
  const double spent1 = l1["totals"]["device_seconds"].get<double>();
  EXPECT_LE(spent1, 4.0) << "the first session overran its budget";
  EXPECT_GT(spent1, 1.5) << "the first session stopped far too early";
  ASSERT_TRUE(fs::exists(dir + "/checkpoints/last"));

  // Resume with a larger budget: the ledger keeps the first session and adds the second.
  Result second = run(train + " --resume auto --budget 8s");
  ASSERT_EQ(second.code, 75) << second.output;
  nlohmann::json l2 = ledger(dir);
  ASSERT_EQ(l2["sessions"].size(), 2u);
  EXPECT_NEAR(l2["sessions"][0]["device_seconds"].get<double>(), spent1, 1e-9);
  const double spent2 = l2["totals"]["device_seconds"].get<double>();
  EXPECT_GT(spent2, spent1 + 1.0);
  EXPECT_LE(spent2, 8.0) << "the two sessions together overran the budget";
  EXPECT_EQ(l2["sessions"][1]["stop_reason"], "the budget");

  // A third start on a spent budget is refused with a one-line error.
  Result third = run(train + " --resume auto --budget 2s");
  EXPECT_EQ(third.code, 2) << third.output;
  EXPECT_NE(third.output.find("budget is spent"), std::string::npos) << third.output;
}

}  // namespace
