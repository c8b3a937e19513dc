#include "hourglass/obs/monitor.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "hourglass/base/log.h"
#include "hourglass/obs/tensorboard.h"

namespace hg::obs {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string field(double v, int decimals = 1) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : std::string();
}

std::string csv_text(std::string s) {  // GPU names: quoted when they hold a comma or quote
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return out + "\"";
}

}  // namespace

MonitorSample::MonitorSample() : data_wait_share(kNaN) { gpu.index = -1; }

std::string low_utilization_cause(const std::vector<MonitorSample>& recent, double threshold_pct) {
  double util = 0, wait = 0, used = 0, total = 0;
  int n_util = 0, n_wait = 0, n_mem = 0;
  for (const MonitorSample& s : recent) {
    if (std::isfinite(s.gpu.utilization_pct)) util += s.gpu.utilization_pct, ++n_util;
    if (std::isfinite(s.data_wait_share)) wait += s.data_wait_share, ++n_wait;
    if (std::isfinite(s.gpu.memory_used_mib) && std::isfinite(s.gpu.memory_total_mib))
      used += s.gpu.memory_used_mib, total += s.gpu.memory_total_mib, ++n_mem;
  }
  if (n_util == 0) return "";
  util /= n_util;
  if (util >= threshold_pct) return "";
  const std::string head =
      fmt::format("the GPU was busy {:.0f}% of the last {} samples", util, recent.size());
  if (n_wait > 0 && wait / n_wait > 0.2)
    return fmt::format(
        "{}: a data stall (the step loop waited for batches {:.0f}% of its time); raise "
        "data.workers, keep the dataset on the GPU (data.placement = \"device\"), or read a "
        "pack (hourglass pack)",
        head, 100 * wait / n_wait);
  if (n_mem > 0 && used / total < 0.25)
    return fmt::format(
        "{}: a small batch (the GPU holds {:.1f} of {:.1f} GiB); raise train.batch_size (the "
        "learning rate with it) so each kernel has more work",
        head, used / n_mem / 1024, total / n_mem / 1024);
  return fmt::format(
      "{}: host-side work between the kernels (waits for the device, small kernels, "
      "evaluation or checkpoints); compare the phases with hourglass bench on the same model",
      head);
}

Monitor::Monitor(MonitorOptions options, std::unique_ptr<GpuReader> gpus)
    : options_(std::move(options)),
      gpus_(std::move(gpus)),
      start_(std::chrono::steady_clock::now()) {
  if (gpus_ && (options_.gpu_index < 0 || options_.gpu_index >= gpus_->count())) gpus_.reset();
  const bool fresh = !std::filesystem::exists(options_.csv_path);
  if (fresh) {
    if (std::FILE* f = std::fopen(options_.csv_path.c_str(), "a")) {
      std::fprintf(f, "%s\n", csv_header().c_str());
      std::fclose(f);
    }
  }
  record();  // the first sample before the constructor returns: every run has one
  thread_ = std::thread([this] { loop(); });
}

Monitor::~Monitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Monitor::samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

std::string Monitor::warning() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return warning_;
}

std::string Monitor::csv_header() {
  return "unix_time,elapsed_s,gpu,gpu_name,gpu_util_pct,gpu_mem_used_mib,gpu_mem_total_mib,"
         "gpu_power_w,gpu_temp_c,gpu_sm_clock_mhz,gpu_mem_clock_mhz,host_cpu_pct,"
         "host_mem_used_mib,host_mem_total_mib,process_rss_mib,data_wait_share";
}

std::string Monitor::csv_row(const MonitorSample& s) {
  const GpuReading& g = s.gpu;
  // Unix time to the millisecond: samples less than a second apart keep their order and spacing
  // on the report's time axes.
  return fmt::format("{:.3f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", unix_time_now(),
                     field(s.elapsed_s, 2), g.index >= 0 ? std::to_string(g.index) : "",
                     csv_text(g.name), field(g.utilization_pct, 0), field(g.memory_used_mib, 0),
                     field(g.memory_total_mib, 0), field(g.power_w), field(g.temperature_c, 0),
                     field(g.sm_clock_mhz, 0), field(g.memory_clock_mhz, 0), field(s.host.cpu_pct),
                     field(s.host.memory_used_mib, 0), field(s.host.memory_total_mib, 0),
                     field(s.host.process_rss_mib, 0), field(s.data_wait_share, 4));
}

std::vector<std::pair<std::string, double>> Monitor::values(const MonitorSample& s) {
  const GpuReading& g = s.gpu;
  std::vector<std::pair<std::string, double>> all;
  if (g.index >= 0)
    all = {{"gpu_util_pct", g.utilization_pct},       {"gpu_mem_used_mib", g.memory_used_mib},
           {"gpu_mem_total_mib", g.memory_total_mib}, {"gpu_power_w", g.power_w},
           {"gpu_temp_c", g.temperature_c},           {"gpu_sm_clock_mhz", g.sm_clock_mhz},
           {"gpu_mem_clock_mhz", g.memory_clock_mhz}};
  all.insert(all.end(), {{"host_cpu_pct", s.host.cpu_pct},
                         {"host_mem_used_mib", s.host.memory_used_mib},
                         {"process_rss_mib", s.host.process_rss_mib},
                         {"data_wait_share", s.data_wait_share}});
  std::vector<std::pair<std::string, double>> known;
  for (const auto& [name, value] : all)
    if (std::isfinite(value)) known.emplace_back(name, value);
  return known;
}

MonitorSample Monitor::sample() {
  MonitorSample s;
  s.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (gpus_) s.gpu = gpus_->read(options_.gpu_index);
  s.host = host_.read();
  if (options_.data_wait) {
    const auto [wait, loop] = options_.data_wait();
    if (loop > last_wait_.second)
      s.data_wait_share = (wait - last_wait_.first) / (loop - last_wait_.second);
    last_wait_ = {wait, loop};
  }
  return s;
}

void Monitor::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  bool first = true;  // taken by the constructor
  while (!stop_) {
    if (!first) {
      lock.unlock();
      record();
      lock.lock();
    }
    first = false;
    cv_.wait_for(lock, std::chrono::duration<double>(options_.every_seconds),
                 [this] { return stop_; });
  }
}

void Monitor::record() {
  {
    const MonitorSample s = sample();
    if (std::FILE* f = std::fopen(options_.csv_path.c_str(), "a")) {
      std::fprintf(f, "%s\n", csv_row(s).c_str());
      std::fclose(f);
    }
    if (options_.on_sample) {
      try {
        options_.on_sample(s);
      } catch (const std::exception& e) {
        if (!on_sample_failed_) HG_LOG_ERROR("monitor: {}", e.what());
        on_sample_failed_ = true;
      }
    }
    // The window: the samples of the last warn_window_seconds, once it spans that long.
    window_.push_back(s);
    while (!window_.empty() &&
           s.elapsed_s - window_.front().elapsed_s > options_.warn_window_seconds)
      window_.erase(window_.begin());
    std::string cause;
    if (window_.size() >= 3 &&
        s.elapsed_s - window_.front().elapsed_s >= options_.warn_window_seconds * 0.9)
      cause = low_utilization_cause(window_, options_.low_utilization_pct);
    std::lock_guard<std::mutex> lock(mutex_);
    ++samples_;
    if (!cause.empty() && warning_.empty()) {
      warning_ = cause;
      HG_LOG_WARN("monitor: {}", cause);
    }
  }
}

}  // namespace hg::obs
