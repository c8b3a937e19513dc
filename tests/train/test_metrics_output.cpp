// The trainer's metric files (run_session.h): per-step records every metrics.every_steps
// optimizer steps in steps.jsonl, steps.csv and TensorBoard, the epoch records in metrics.csv and
// TensorBoard beside an unchanged metrics.jsonl, all read back (event files by the independent
// reader of support/tfevents_reader.h); the keys that turn them off; and a resumed run's files.
// Nothing here depends on timing: the timed fields are checked for presence and range only.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "hourglass/obs/monitor.h"
#include "hourglass/train/trainer.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "support/tfevents_reader.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // keeps the fields in file order

// 192 training samples in batches of 32: 6 optimizer steps per epoch, 12 in the run.
Config synthetic_mlp_config() {
  return Config::parse(R"(
    seed = 3
    [model]
    name = "mlp"
    hidden = [32]
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 192, test_size = 64, height = 6, width = 6, channels = 2, classes = 4 }
    workers = 0
    [optim]
    name = "sgd"
    lr = 0.05
    momentum = 0.9
    [train]
    epochs = 2
    batch_size = 32
    [metrics]
    every_steps = 4
  )",
                       "mlp.toml");
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  for (const std::string& line : read_lines(path)) out.push_back(json::parse(line));
  return out;
}

// A CSV as one name -> cell map per row.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  auto cells = [](const std::string& line) {
    std::vector<std::string> out(1);
    for (char c : line) {
      if (c == ',')
        out.emplace_back();
      else
        out.back() += c;
    }
    return out;
  };
  const std::vector<std::string> lines = read_lines(path);
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  const std::vector<std::string> header = cells(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> c = cells(lines[i]);
    EXPECT_EQ(c.size(), header.size()) << path << ": " << lines[i];
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < header.size() && k < c.size(); ++k) row[header[k]] = c[k];
    rows.push_back(row);
  }
  return rows;
}

// Every scalar of every event file in `dir`: tag -> (step -> value), and the SessionLog STARTs.
struct Scalars {
  std::map<std::string, std::map<int64_t, float>> by_tag;
  std::vector<int64_t> session_starts;
  size_t files = 0;
};

Scalars read_tensorboard(const std::string& dir) {
  Scalars s;
  for (const std::string& file : test::tfevents_files(dir)) {
    ++s.files;
    const std::vector<test::TfEvent> events = test::read_tfevents(file);
    EXPECT_FALSE(events.empty());
    if (!events.empty()) EXPECT_EQ(events[0].file_version, "brain.Event:2") << file;
    for (const test::TfEvent& e : events) {
      if (e.session_status == 1) s.session_starts.push_back(e.step);
      for (const auto& [tag, value] : e.scalars) s.by_tag[tag][e.step] = value;
    }
  }
  return s;
}

const std::vector<std::string> kStepFields = {"step",
                                              "epoch",
                                              "time",
                                              "elapsed_s",
                                              "loss",
                                              "lr",
                                              "images_per_s",
                                              "data_wait_share",
                                              "peak_memory_mib",
                                              "budget_device_hours"};
const std::vector<std::string> kEpochFields = {"epoch",
                                               "train_loss",
                                               "train_acc",
                                               "test_loss",
                                               "test_acc",
                                               "images_per_s",
                                               "epoch_seconds",
                                               "lr",
                                               "checkpoint_seconds",
                                               "data_wait_seconds",
                                               "planning_seconds",
                                               "peak_memory_mib",
                                               "reserved_memory_mib",
                                               "memory_fragmentation"};

std::vector<std::string> keys_of(const json& j) {
  std::vector<std::string> k;
  for (const auto& item : j.items()) k.push_back(item.key());
  return k;
}

TEST(MetricsOutput, StepRecordsEveryNStepsInEverySinkBesideTheEpochLines) {
  const std::string dir = test::fresh_temp_dir("metrics_output_all");
  train::Trainer t(synthetic_mlp_config(), {dir, false});
  const std::vector<train::EpochMetrics> history = t.run();
  ASSERT_EQ(history.size(), 2u);
  ASSERT_EQ(t.global_step(), 12);

  // steps.jsonl: steps 4, 8, 12 with every field.
  const std::vector<json> steps = read_jsonl(dir + "/steps.jsonl");
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& r = steps[i];
    EXPECT_EQ(keys_of(r), kStepFields) << r.dump();
    EXPECT_EQ(r["step"], int64_t(4 * (i + 1)));
    EXPECT_EQ(r["epoch"], i < 1 ? 1 : 2);  // step 4 in epoch 1; 8 and 12 in epoch 2
    EXPECT_EQ(r["lr"].get<double>(), 0.05);
    const double loss = r["loss"].get<double>();
    EXPECT_TRUE(std::isfinite(loss) && loss > 0 && loss < 10) << loss;
    EXPECT_GT(r["images_per_s"].get<double>(), 0);
    const double share = r["data_wait_share"].get<double>();
    EXPECT_TRUE(share >= 0 && share <= 1) << share;
    EXPECT_GT(r["peak_memory_mib"].get<double>(), 0);
    EXPECT_GE(r["elapsed_s"].get<double>(), 0);
    EXPECT_GT(r["time"].get<double>(), 1.5e9);
    EXPECT_GE(r["budget_device_hours"].get<double>(), 0);
  }
  EXPECT_LT(steps[2]["loss"].get<double>(), 2.0);  // log(4) = 1.39 at the start, falling

  // steps.csv: the same records, the same values (to the double).
  const auto step_rows = read_csv(dir + "/steps.csv");
  ASSERT_EQ(step_rows.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(step_rows[i].size(), kStepFields.size());
    for (const std::string& name : kStepFields)
      EXPECT_EQ(std::stod(step_rows[i].at(name)), steps[i][name].get<double>()) << name;
  }

  // TensorBoard: "step/<name>" at steps 4, 8, 12 and "epoch/<name>" at steps 6, 12, equal to the
  // JSON values in float.
  Scalars tb = read_tensorboard(dir + "/tensorboard");
  EXPECT_EQ(tb.files, 1u);
  EXPECT_TRUE(tb.session_starts.empty());  // a new run
  EXPECT_EQ(tb.by_tag.count("step/step"), 0u);
  EXPECT_EQ(tb.by_tag.count("step/time"), 0u);
  for (const std::string& name : kStepFields) {
    if (name == "step" || name == "time") continue;
    const auto& series = tb.by_tag["step/" + name];
    ASSERT_EQ(series.size(), 3u) << name;
    for (const json& r : steps)
      EXPECT_EQ(series.at(r["step"].get<int64_t>()), float(r[name].get<double>())) << name;
  }

  // metrics.jsonl: exactly the epoch lines it always had; metrics.csv and TensorBoard agree.
  const std::vector<json> epochs = read_jsonl(dir + "/metrics.jsonl");
  ASSERT_EQ(epochs.size(), 2u);
  const auto epoch_rows = read_csv(dir + "/metrics.csv");
  ASSERT_EQ(epoch_rows.size(), 2u);
  for (size_t i = 0; i < epochs.size(); ++i) {
    EXPECT_EQ(keys_of(epochs[i]), kEpochFields) << epochs[i].dump();
    EXPECT_EQ(epochs[i]["epoch"], int64_t(i + 1));
    EXPECT_EQ(epochs[i]["train_loss"].get<double>(), history[i].train_loss);
    const int64_t step = 6 * int64_t(i + 1);
    for (const std::string& name : kEpochFields) {
      const double v = epochs[i][name].get<double>();
      EXPECT_EQ(std::stod(epoch_rows[i].at(name)), v) << name;
      EXPECT_EQ(tb.by_tag["epoch/" + name].at(step), float(v)) << name;
    }
  }

  // The same run with every new output off: its epoch lines hold the same fields and the same
  // numbers (the untimed ones), and no other metric file appears.
  Config off = synthetic_mlp_config();
  off.set_override("metrics.every_steps=0");
  off.set_override("metrics.csv=false");
  off.set_override("metrics.tensorboard=false");
  const std::string off_dir = test::fresh_temp_dir("metrics_output_off");
  train::Trainer plain(off, {off_dir, false});
  plain.run();
  const std::vector<json> plain_epochs = read_jsonl(off_dir + "/metrics.jsonl");
  ASSERT_EQ(plain_epochs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(keys_of(plain_epochs[i]), kEpochFields);
    for (const char* name : {"epoch", "train_loss", "train_acc", "test_loss", "test_acc", "lr"})
      EXPECT_EQ(plain_epochs[i][name], epochs[i][name]) << name;
  }
  for (const char* name : {"steps.jsonl", "steps.csv", "metrics.csv", "tensorboard"})
    EXPECT_FALSE(fs::exists(off_dir + "/" + name)) << name;
}

TEST(MetricsOutput, AResumedRunKeepsOneRecordPerStepAndTellsTensorBoard) {
  const std::string dir = test::fresh_temp_dir("metrics_output_resume");
  Config c = synthetic_mlp_config();
  c.set_override("metrics.every_steps=2");
  {
    train::TrainerOptions o{dir, false};
    o.stop_after_steps = 7;  // checkpointed at step 7, in epoch 2
    train::Trainer first(c, o);
    first.run();
    ASSERT_TRUE(first.stopped());
  }
  // As if the run had been killed after step 8 and its records, after the checkpoint of step 7:
  // steps the resumed run trains again.
  std::ofstream(dir + "/steps.jsonl", std::ios::app) << "{\"step\": 8, \"loss\": 99}\n";
  std::ofstream(dir + "/steps.csv", std::ios::app) << "8,2,0,0,99,0.05,0,0,0,0\n";
  train::TrainerOptions o{dir, false};
  o.resume = "auto";
  train::Trainer resumed(c, o);
  resumed.run();
  ASSERT_FALSE(resumed.stopped());

  const std::vector<json> steps = read_jsonl(dir + "/steps.jsonl");
  ASSERT_EQ(steps.size(), 6u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i]["step"], int64_t(2 * (i + 1)));
    EXPECT_LT(steps[i]["loss"].get<double>(), 10);
  }
  const auto rows = read_csv(dir + "/steps.csv");
  ASSERT_EQ(rows.size(), 6u);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(std::stod(rows[i].at("loss")), steps[i]["loss"].get<double>());
  const auto epoch_rows = read_csv(dir + "/metrics.csv");
  ASSERT_EQ(epoch_rows.size(), 2u);
  EXPECT_EQ(epoch_rows[0].at("epoch"), "1");
  EXPECT_EQ(epoch_rows[1].at("epoch"), "2");

  // One event file per session; the second starts by dropping steps from 8 on.
  Scalars tb = read_tensorboard(dir + "/tensorboard");
  EXPECT_EQ(tb.files, 2u);
  EXPECT_EQ(tb.session_starts, std::vector<int64_t>{8});
  EXPECT_EQ(tb.by_tag["step/loss"].size(), 6u);
  EXPECT_EQ(tb.by_tag["epoch/test_acc"].size(), 2u);
}

// The device monitor's samples (monitor.csv) go to TensorBoard too, as "monitor/<name>" at the
// step they were taken at: known readings only (no GPU on this run, and the first CPU reading
// has no interval yet).
TEST(MetricsOutput, MonitorSamplesBecomeTensorBoardScalars) {
  obs::MonitorSample sample;
  sample.host.process_rss_mib = 12.5;
  sample.host.memory_used_mib = 1000;
  const auto values = obs::Monitor::values(sample);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0], (std::pair<std::string, double>{"host_mem_used_mib", 1000}));
  EXPECT_EQ(values[1], (std::pair<std::string, double>{"process_rss_mib", 12.5}));
  sample.gpu.index = 0;
  sample.gpu.utilization_pct = 87;
  EXPECT_EQ(obs::Monitor::values(sample).front(),
            (std::pair<std::string, double>{"gpu_util_pct", 87}));

  Config c = synthetic_mlp_config();
  c.set_override("monitor.every_seconds=0.05");  // its first sample is taken as the run starts
  const std::string dir = test::fresh_temp_dir("metrics_output_monitor");
  train::Trainer t(c, {dir, false});
  t.run();
  Scalars tb = read_tensorboard(dir + "/tensorboard");
  const auto& rss = tb.by_tag["monitor/process_rss_mib"];
  ASSERT_GE(rss.size(), 1u);
  for (const auto& [step, value] : rss) {
    EXPECT_GE(step, 0);
    EXPECT_LE(step, 12);
    EXPECT_GT(value, 0);
  }
  EXPECT_EQ(tb.by_tag.count("monitor/gpu_util_pct"), 0u);  // no GPU
  EXPECT_EQ(tb.by_tag["step/loss"].size(), 3u);            // beside the step records

  // Without TensorBoard the monitor writes monitor.csv only.
  c.set_override("metrics.tensorboard=false");
  const std::string csv_only = test::fresh_temp_dir("metrics_output_monitor_csv");
  train::Trainer u(c, {csv_only, false});
  u.run();
  EXPECT_TRUE(fs::exists(csv_only + "/monitor.csv"));
  EXPECT_FALSE(fs::exists(csv_only + "/tensorboard"));
}

TEST(MetricsOutput, KeysAreCheckedAndLeaveTheTrajectoryAlone) {
  EXPECT_EQ(train::MetricsConfig{}.every_steps, 50);  // the defaults without a [metrics] table
  EXPECT_TRUE(train::MetricsConfig{}.csv);
  EXPECT_TRUE(train::MetricsConfig{}.tensorboard);
  const train::RunConfig defaults = train::parse_run_config(synthetic_mlp_config());
  EXPECT_EQ(defaults.metrics.every_steps, 4);
  EXPECT_TRUE(defaults.metrics.csv);
  EXPECT_TRUE(defaults.metrics.tensorboard);
  Config c = synthetic_mlp_config();
  c.set_override("metrics.every_steps=0");
  c.set_override("metrics.csv=false");
  c.set_override("metrics.tensorboard=false");
  const train::RunConfig off = train::parse_run_config(c);
  EXPECT_EQ(off.metrics.every_steps, 0);
  EXPECT_FALSE(off.metrics.csv);
  EXPECT_FALSE(off.metrics.tensorboard);
  EXPECT_EQ(train::trajectory_config_text(off), train::trajectory_config_text(defaults));
  EXPECT_EQ(train::trajectory_config_text(off).find("metrics"), std::string::npos);
  Config bad = synthetic_mlp_config();
  bad.set_override("metrics.every_steps=-1");
  test::expect_invalid([&] { train::parse_run_config(bad); }, {"metrics.every_steps", "-1"});
}

}  // namespace
}  // namespace hg
