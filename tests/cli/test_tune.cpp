// `hourglass tune` on the CPU, where nothing is searched: it runs the config's step on the full
// and on the last, smaller batch and the evaluation, reports them, and refuses the tune keys'
// bad values and misspellings as train does. `train` logs the time to its first step.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

std::string write_config(const std::string& dir) {
  const std::string path = dir + "/tune.toml";
  std::ofstream(path) << R"(
seed = 1
threads = 1
[model]
name = "small_cnn"
[data]
dataset = "synthetic"
synthetic = { train_size = 200, test_size = 40, height = 16, width = 16, channels = 3, classes = 10 }
workers = 0
[train]
batch_size = 32
eval_batch_size = 16
)";
  return path;
}

TEST(Tune, RunsEveryBatchShapeOfTheConfigOnce) {
  const std::string dir = test::fresh_temp_dir("hourglass_tune");
  const test::SplitRunResult r = test::run_hourglass_split(
      "tune " + write_config(dir) + " --json --set tune.cache_dir='\"" + dir + "/cache\"'",
      "env -u HOURGLASS_CACHE_DIR");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["train_batch_rows"], nlohmann::json::array({32, 200 % 32})) << r.out;
  EXPECT_EQ(j["eval_samples"], 40);
  EXPECT_EQ(j["searched"], 0);  // the cpu backend searches nothing
  EXPECT_EQ(j["stored"], 0);
  EXPECT_EQ(j["cache_mode"], "on");
  EXPECT_EQ(j["cache_dir"], dir + "/cache");
}

TEST(Tune, RanksTunesOneRanksShareOfEachBatch) {
  const std::string dir = test::fresh_temp_dir("hourglass_tune_ranks");
  const test::SplitRunResult r = test::run_hourglass_split(
      "tune " + write_config(dir) + " --ranks 2 --json --set " + "tune.cache='\"off\"'");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["train_batch_rows"], nlohmann::json::array({16, (200 % 32) / 2})) << r.out;
  EXPECT_EQ(j["eval_samples"], 20);  // this rank's half of the test set
  EXPECT_EQ(j["cache_mode"], "off");
}

TEST(Tune, RefusesBadTuneKeys) {
  const std::string dir = test::fresh_temp_dir("hourglass_tune_keys");
  const std::string config = write_config(dir);
  for (const char* set :
       {"tune.cache='\"sometimes\"'", "tune.cache_dir='\"relative/dir\"'", "tune.cahce='\"on\"'"}) {
    const test::RunResult r = test::run_hourglass("tune " + config + " --set " + set);
    EXPECT_EQ(r.code, 2) << set << ": " << r.output;
  }
}

TEST(Tune, TrainLogsTheTimeToItsFirstStep) {
  const std::string dir = test::fresh_temp_dir("hourglass_tune_first_step");
  const test::RunResult r = test::run_hourglass("train " + write_config(dir) + " --run-dir " + dir +
                                                "/run --no-progress --set tune.cache='\"off\"'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("first training step issued "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" s after process start"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hg
