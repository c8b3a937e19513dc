// The op profiler inside a run (profile.enabled, train/run_profiler.h): a window of training
// steps after the first few is written to the run directory as profile.json (the table
// `hourglass profile --json` prints, which `hourglass report` reads) and trace.json, recording
// exactly the window's training steps (no evaluation), ending early at an epoch's end; bad
// [profile] keys are refused naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hourglass/train/config/run_config.h"
#include "hourglass/train/trainer.h"
#include "support/expect_error.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

// 6 batches of 16 an epoch, 2 epochs.
Config profiled_config(int64_t steps, int64_t after) {
  Config c = Config::parse(R"(
    seed = 2
    [model]
    name = "small_cnn"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 96, test_size = 32, height = 8, width = 8, channels = 1, classes = 3 }
    workers = 0
    [train]
    epochs = 2
    batch_size = 16
    [profile]
    enabled = true
  )",
                           "profiled.toml");
  c.set_override("profile.steps=" + std::to_string(steps));
  c.set_override("profile.after=" + std::to_string(after));
  return c;
}

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(test::read_file(path));
}

int64_t calls_of(const nlohmann::json& profile, const std::string& op) {
  for (const auto& row : profile["rows"])
    if (row["op"] == op && row["parent"] == "") return row["calls"].get<int64_t>();
  return 0;
}

TEST(RunProfiler, WritesTheWindowsStepsToTheRunDirectory) {
  const std::string dir = test::fresh_temp_dir("hourglass_run_profiler");
  train::Trainer t(profiled_config(3, 2), {dir, false});
  t.run();
  const nlohmann::json p = read_json(dir + "/profile.json");
  EXPECT_EQ(p["steps"], 3);
  EXPECT_EQ(p["device"], "cpu");
  EXPECT_EQ(p["config"], dir + "/config.toml");
  EXPECT_GT(p["step_ms"].get<double>(), 0.0);
  // On the CPU the ops are most of a step (the host clock times them; the loader is in memory).
  EXPECT_GT(p["ops_share"].get<double>(), 0.5);
  EXPECT_LE(p["ops_share"].get<double>(), 1.05);
  // One backward pass of the loss per training step, and no evaluation in the window.
  EXPECT_EQ(calls_of(p, "cross_entropy_backward"), 3);
  EXPECT_EQ(calls_of(p, "conv2d"), calls_of(p, "conv2d_backward"));
  const nlohmann::json trace = read_json(dir + "/trace.json");
  ASSERT_TRUE(trace.contains("traceEvents"));
  EXPECT_GT(trace["traceEvents"].size(), 10u);
}

TEST(RunProfiler, AWindowEndsAtTheEpochsEnd) {
  const std::string dir = test::fresh_temp_dir("hourglass_run_profiler_short");
  train::Trainer t(profiled_config(50, 4), {dir, false});
  t.run();
  const nlohmann::json p = read_json(dir + "/profile.json");
  EXPECT_EQ(p["steps"], 2) << "steps 5 and 6 of the first epoch's 6";
  EXPECT_EQ(calls_of(p, "cross_entropy_backward"), 2);
}

TEST(RunProfiler, OffWritesNothing) {
  const std::string dir = test::fresh_temp_dir("hourglass_run_profiler_off");
  Config c = profiled_config(3, 0);
  c.set_override("profile.enabled=false");
  train::Trainer t(c, {dir, false});
  t.run();
  EXPECT_FALSE(std::filesystem::exists(dir + "/profile.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/trace.json"));
}

TEST(RunProfiler, BadKeysAreRefused) {
  test::expect_invalid([] { train::parse_run_config(profiled_config(0, 2)); },
                       {"profile.steps", "[1, 100000]"});
  test::expect_invalid([] { train::parse_run_config(profiled_config(3, -1)); },
                       {"profile.after", "non-negative"});
}

}  // namespace
}  // namespace hg
