// End-to-end tests of `hourglass bench` on the CPU: its step is built as train builds a run's
// (from its flags as config values, or from --config), and bad flags are one-line errors
// naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_binary.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

const char* kQuick = " --steps 2 --warmup 1 --rounds 1 --json";

// The JSON line bench printed on stdout.
nlohmann::json bench_json(const std::string& args) {
  const test::SplitRunResult r = test::run_hourglass_split("bench " + args + kQuick);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

std::string write_config(const std::string& name, const std::string& text) {
  const fs::path dir = fs::path(::testing::TempDir()) / "hourglass_cli_bench";
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(CliBench, FlagsMeasureTheirModelWithTheEngineSettingsGiven) {
  const nlohmann::json r = bench_json(
      "small-cnn --batch 8 --size 8 --engine relu_mask_bits=false "
      "--engine fused_gradient_sum=false");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["model"], "small-cnn");
  EXPECT_EQ(r["batch"], 8);
  EXPECT_EQ(r["micro_batch"], 8);
  EXPECT_EQ(r["precision"], "fp32");
  EXPECT_EQ(r["engine"]["relu_mask_bits"], false) << r["engine"];
  EXPECT_EQ(r["engine"]["fused_gradient_sum"], false) << r["engine"];
  EXPECT_EQ(r["engine"]["fused_batch_norm"], true) << r["engine"];
  EXPECT_TRUE(std::isfinite(r["final_loss"].get<double>()));
  EXPECT_GT(r["train_images_per_s"].get<double>(), 0);
  EXPECT_GT(r["eval_images_per_s"].get<double>(), 0);
}

// --config measures the config's own step: its model, optimizer, batch (with --set over it),
// data shape and [engine] table.
TEST(CliBench, AConfigsStepIsMeasuredAsTrainWouldTakeIt) {
  const std::string config = write_config("run.toml", R"(
[model]
name = "small_cnn"
[data]
dataset = "synthetic"
[data.synthetic]
train_size = 48
test_size = 8
height = 8
width = 8
channels = 1
classes = 4
[optim]
name = "adamw"
lr = 0.001
[train]
batch_size = 16
[engine]
fused_gradient_sum = false
)");
  const nlohmann::json r = bench_json("--config " + config + " --set train.batch_size=12");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r["config"], config);
  EXPECT_EQ(r["model"], "small_cnn");
  EXPECT_EQ(r["batch"], 12);
  EXPECT_EQ(r["engine"]["fused_gradient_sum"], false) << r["engine"];
  EXPECT_EQ(r["engine"]["relu_mask_bits"], true) << r["engine"];
  EXPECT_TRUE(std::isfinite(r["final_loss"].get<double>()));

  // A misspelt key is refused as train refuses it, naming where it came from.
  const test::RunResult misspelt =
      test::run_hourglass("bench --config " + config + " --engine relu_mask_bit=false" + kQuick);
  EXPECT_NE(misspelt.code, 0);
  EXPECT_NE(misspelt.output.find("'engine.relu_mask_bit' from --engine relu_mask_bit=false"),
            std::string::npos)
      << misspelt.output;
  EXPECT_NE(misspelt.output.find("relu_mask_bits"), std::string::npos) << misspelt.output;
}

TEST(CliBench, BadFlagsAreOneLineErrorsNamingTheFlag) {
  struct Case {
    std::string args, expected;
  };
  const std::string config = write_config("plain.toml", "[model]\nname = \"small_cnn\"\n");
  for (const Case& c : std::vector<Case>{
           {"small-cnn --engine bogus=true", "'engine.bogus' from --engine bogus=true"},
           {"small-cnn --engine fused_bn=false", "not an engine setting"},
           {"small-cnn --engine fused_bn=false", "fused_batch_norm"},
           {"small-cnn --engine fused_batch_norm=maybe", "--engine fused_batch_norm=maybe"},
           {"small-cnn --engine fused_batch_norm=0", "--engine fused_batch_norm=0"},
           {"small-cnn --engine fused_batch_norm=0", "true or false"},
           {"small-cnn --precision fp8", "bench's flags: precision = \"fp8\" is not a precision"},
           {"small-cnn --graph sometimes", "from --graph sometimes"},
           {"small-cnn --batch 0", "from --batch 0"},
           {"nonesuch", "unknown model 'nonesuch'"},
           {"--config " + config + " --batch 8", "--batch excludes --config"},
           {"small-cnn --set train.epochs=2", "--set requires --config"},
       }) {
    const test::RunResult r = test::run_hourglass("bench " + c.args + kQuick);
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace hg
