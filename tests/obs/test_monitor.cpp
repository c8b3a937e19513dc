// The device monitor: monitor.csv rows from a fake NVML (tests/device/fakes/), the data-wait share
// between samples, the low-utilisation diagnosis, and the trainer writing monitor.csv. Waits
// are keyed to samples written, never to the clock.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/obs/monitor.h"
#include "hourglass/train/trainer.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

// Polls until `ok` holds; a failure after a minute (the sampler is stuck), never a timing test.
template <typename Fn>
bool eventually(Fn&& ok) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!ok()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(Monitor, WritesOneCsvRowPerSampleWithTheGpusReadings) {
  ::setenv("HOURGLASS_NVML_LIBRARY", HG_FAKE_NVML, 1);
  std::unique_ptr<GpuReader> gpus = open_gpu_reader();
  ::unsetenv("HOURGLASS_NVML_LIBRARY");
  ASSERT_NE(gpus, nullptr);
  const std::string path = test::fresh_temp_dir("hourglass_monitor_csv") + "/monitor.csv";
  obs::MonitorOptions o;
  o.every_seconds = 0.05;
  o.csv_path = path;
  o.gpu_index = 1;
  // The loop's totals grow by 1 s of which 0.25 s waiting between any two samples.
  int calls = 0;
  o.data_wait = [&calls] {
    ++calls;
    return std::pair<double, double>{0.25 * calls, 1.0 * calls};
  };
  {
    obs::Monitor monitor(o, std::move(gpus));
    ASSERT_TRUE(eventually([&] { return monitor.samples() >= 3; }));
  }
  const auto rows = read_csv(path);
  ASSERT_GE(rows.size(), 4u);  // header + 3
  const std::vector<std::string>& header = rows[0];
  auto col = [&](const std::string& name) {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return i;
    ADD_FAILURE() << "no column " << name;
    return size_t(0);
  };
  for (size_t r = 1; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r].size(), header.size()) << "row " << r;
    EXPECT_EQ(rows[r][col("gpu")], "1");
    EXPECT_EQ(rows[r][col("gpu_name")], "Fake GPU 1");
    EXPECT_EQ(rows[r][col("gpu_util_pct")], "90");
    EXPECT_EQ(rows[r][col("gpu_mem_used_mib")], "16384");
    EXPECT_EQ(rows[r][col("gpu_power_w")], "312.5");
    EXPECT_EQ(rows[r][col("gpu_sm_clock_mhz")], "1980");
    EXPECT_FALSE(rows[r][col("host_mem_total_mib")].empty());
  }
  EXPECT_EQ(rows[1][col("data_wait_share")], "0.2500");  // against the totals of zero
  EXPECT_EQ(rows[2][col("data_wait_share")], "0.2500");
}

obs::MonitorSample sample(double util, double wait_share, double used_mib, double total_mib) {
  obs::MonitorSample s;
  s.gpu.index = 0;
  s.gpu.utilization_pct = util;
  s.gpu.memory_used_mib = used_mib;
  s.gpu.memory_total_mib = total_mib;
  s.data_wait_share = wait_share;
  return s;
}

TEST(Monitor, LowUtilisationNamesTheLikelyCause) {
  using V = std::vector<obs::MonitorSample>;
  // Busy: nothing to say.
  EXPECT_EQ(obs::low_utilization_cause(V(4, sample(95, 0.5, 1000, 80000)), 50), "");
  // Idle while the loop waits for batches: a data stall.
  const std::string stall = obs::low_utilization_cause(V(4, sample(30, 0.6, 60000, 80000)), 50);
  EXPECT_NE(stall.find("data stall"), std::string::npos) << stall;
  EXPECT_NE(stall.find("60%"), std::string::npos) << stall;
  EXPECT_NE(stall.find("data.workers"), std::string::npos) << stall;
  // Idle, fed, and holding little memory: a small batch.
  const std::string small = obs::low_utilization_cause(V(4, sample(20, 0.01, 4000, 80000)), 50);
  EXPECT_NE(small.find("small batch"), std::string::npos) << small;
  EXPECT_NE(small.find("train.batch_size"), std::string::npos) << small;
  // Idle, fed, memory well used: the host between kernels.
  const std::string host = obs::low_utilization_cause(V(4, sample(35, 0.02, 60000, 80000)), 50);
  EXPECT_NE(host.find("host-side"), std::string::npos) << host;
  // No GPU readings: nothing known.
  EXPECT_EQ(obs::low_utilization_cause(V(4, obs::MonitorSample()), 50), "");
}

// A CPU run writes monitor.csv beside metrics.jsonl (host columns; no GPU ones).
TEST(Monitor, TheTrainerWritesMonitorCsv) {
  Config c = Config::parse(R"(
    seed = 1
    [model]
    name = "mlp"
    hidden = [16]
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 64, test_size = 32, height = 4, width = 4, channels = 1, classes = 2 }
    workers = 0
    [train]
    epochs = 1
    batch_size = 16
    [monitor]
    every_seconds = 0.05
  )",
                           "monitor.toml");
  const std::string dir = test::fresh_temp_dir("hourglass_monitor_trainer");
  train::Trainer t(c, {dir, false});
  t.run();
  const auto rows = read_csv(dir + "/monitor.csv");
  ASSERT_GE(rows.size(), 2u);  // the header and the sample taken at the start
  EXPECT_EQ(rows[0][0], "unix_time");
  EXPECT_EQ(rows[1][2], "");  // no GPU
}

// `hourglass monitor`: a line per GPU per sample, or monitor.csv's rows with --csv.
TEST(Monitor, TheMonitorCommandPrintsEveryGpuPerSample) {
  ::setenv("HOURGLASS_NVML_LIBRARY", HG_FAKE_NVML, 1);
  const test::RunResult table = test::run_hourglass("monitor --count 2 --interval 0.05");
  const test::RunResult csv = test::run_hourglass("monitor --count 1 --interval 0.05 --csv");
  ::unsetenv("HOURGLASS_NVML_LIBRARY");
  EXPECT_EQ(table.code, 0) << table.output;
  int gpu_lines = 0;
  std::stringstream lines(table.output);
  for (std::string line; std::getline(lines, line);)
    if (line.find("312.5") != std::string::npos) ++gpu_lines;
  EXPECT_EQ(gpu_lines, 4) << table.output;  // 2 samples x 2 GPUs
  EXPECT_EQ(csv.code, 0) << csv.output;
  EXPECT_NE(csv.output.find("Fake GPU 0"), std::string::npos) << csv.output;
  EXPECT_NE(csv.output.find("Fake GPU 1"), std::string::npos) << csv.output;
  EXPECT_NE(csv.output.find(obs::Monitor::csv_header()), std::string::npos) << csv.output;
}

}  // namespace
}  // namespace hg
