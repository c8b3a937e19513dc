// The device monitor of a run: a background thread that samples the run's GPU (utilisation,
// memory, power, temperature, clocks: device/machine_readings.h), the host's CPU and memory and
// the step loop's data-wait share every few seconds, appends each sample to monitor.csv, and
// warns once when the GPU stays mostly idle, naming the likely cause from those numbers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hourglass/device/machine_readings.h"

namespace hg::obs {

struct MonitorSample {
  double elapsed_s = 0;
  GpuReading gpu;  // index -1 when the run has no GPU readings
  HostReading host;
  double data_wait_share;  // of the step loop's time since the previous sample; NaN: unknown
  MonitorSample();
};

// Why a GPU sat mostly idle over `recent` samples (its mean utilisation under
// `threshold_pct`), from their numbers: "" when it did not (or nothing is known).
std::string low_utilization_cause(const std::vector<MonitorSample>& recent, double threshold_pct);

struct MonitorOptions {
  double every_seconds = 5;
  std::string csv_path;  // appended to; the header is written when the file is new
  int gpu_index = -1;    // the GPU to read (-1: none)
  // The step loop's totals so far: (seconds waiting for batches, seconds in the loop).
  std::function<std::pair<double, double>()> data_wait;
  // Also handed each sample, on the monitor's thread, after its row is written (the trainer's
  // TensorBoard scalars). An exception it throws is logged once and the sampling goes on.
  std::function<void(const MonitorSample&)> on_sample;
  double low_utilization_pct = 50;  // warn when the mean over the window is below this
  double warn_window_seconds = 60;  // ... over this much time
};

class Monitor {
 public:
  // Takes the first sample, then samples every every_seconds on a thread of its own; `gpus`
  // may be null (host readings only).
  Monitor(MonitorOptions options, std::unique_ptr<GpuReader> gpus);
  ~Monitor();  // stops the thread after its current sample
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Samples written so far; the warning given ("" none).
  int64_t samples() const;
  std::string warning() const;

  // A sample's numbers as name/value pairs (gpu_util_pct, gpu_mem_used_mib, ..., host_cpu_pct,
  // process_rss_mib, data_wait_share), without those it does not know (NaN).
  static std::vector<std::pair<std::string, double>> values(const MonitorSample& s);
  // The CSV columns and one sample as a CSV row (empty fields for NaN).
  static std::string csv_header();
  static std::string csv_row(const MonitorSample& s);

 private:
  void loop();
  // Takes a sample and writes it (monitor.csv, on_sample), then checks for low utilisation.
  void record();
  MonitorSample sample();

  MonitorOptions options_;
  std::unique_ptr<GpuReader> gpus_;
  HostReader host_;
  std::chrono::steady_clock::time_point start_;
  std::pair<double, double> last_wait_{0, 0};
  std::vector<MonitorSample> window_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  int64_t samples_ = 0;
  std::string warning_;
  bool on_sample_failed_ = false;  // its failure was logged
  std::thread thread_;
};

}  // namespace hg::obs
