// `hourglass profile`: the table's ops add up to the measured step time on the CPU (within 10%:
// the rest is the host's work between ops), the expected ops are there with their call counts,
// and the trace is Chrome's trace-event JSON with the host and device rows.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

std::string write_config(const std::string& dir) {
  const std::string path = dir + "/profile.toml";
  std::ofstream(path) << R"(
seed = 1
threads = 1
[model]
name = "small_cnn"
[data]
dataset = "synthetic"
synthetic = { train_size = 256, test_size = 32, height = 32, width = 32, channels = 3, classes = 10 }
workers = 0
[train]
batch_size = 32
)";
  return path;
}

TEST(Profile, TheOpsAddUpToTheStepAndTheTraceLoads) {
  const std::string dir = test::fresh_temp_dir("hourglass_profile");
  const std::string trace = dir + "/trace.json";
  const test::RunResult r = test::run_hourglass("profile " + write_config(dir) +
                                                " --steps 4 --warmup 1 --json --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.output;
  const size_t brace = r.output.find('{');
  ASSERT_NE(brace, std::string::npos) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(brace));
  EXPECT_EQ(j["steps"], 4);
  const double share = j["ops_share"].get<double>();
  EXPECT_GT(share, 0.9) << r.output;
  EXPECT_LT(share, 1.1) << r.output;
  std::set<std::string> ops;
  for (const auto& row : j["rows"]) {
    ops.insert(row["op"].get<std::string>());
    EXPECT_GE(row["total_ms"].get<double>(), 0);
    if (row["op"] == "sgd_step") EXPECT_EQ(row["calls"], 4);  // one update a step
  }
  for (const char* op : {"conv2d", "conv2d_backward", "batch_norm_train", "linear", "sgd_step"})
    EXPECT_TRUE(ops.count(op)) << op << " missing from " << r.output;

  std::ifstream in(trace);
  const nlohmann::json t = nlohmann::json::parse(in);
  std::set<int> rows;
  int complete = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    rows.insert(e["tid"].get<int>());
    EXPECT_GE(e["dur"].get<double>(), 0);
  }
  EXPECT_GT(complete, 20);
  EXPECT_EQ(rows, (std::set<int>{1, 2}));
}

TEST(Profile, TheTableNamesTheOpsAndTheShare) {
  const std::string dir = test::fresh_temp_dir("hourglass_profile_table");
  const test::RunResult r =
      test::run_hourglass("profile " + write_config(dir) + " --steps 2 --warmup 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("conv2d_backward"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all ops (top level)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("of the step time"), std::string::npos) << r.output;
}

TEST(Profile, AMisspelledKeyIsRefusedAsTrainRefusesIt) {
  const std::string dir = test::fresh_temp_dir("hourglass_profile_key");
  const test::RunResult r = test::run_hourglass("profile " + write_config(dir) +
                                                " --set train.epochz=2 --steps 1 --warmup 0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("train.epochz"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train.epochs"), std::string::npos) << r.output;  // the suggestion
}

}  // namespace
}  // namespace hg
