#include "hourglass/device/machine_readings.h"
#include "hourglass/base/environment.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

namespace hg {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMiB = 1024.0 * 1024.0;

// A library opened with dlopen, closed with it.
class Library {
 public:
  explicit Library(const std::string& file) : handle_(dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) {
      const char* e = dlerror();
      error_ = e != nullptr ? e : "cannot open";
    }
  }
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  template <typename Fn>
  Fn symbol(const char* name) const {
    return handle_ != nullptr ? reinterpret_cast<Fn>(dlsym(handle_, name)) : nullptr;
  }

 private:
  void* handle_;
  std::string error_;
};

std::string library_file(const char* variable, const char* standard) {
  const char* override_file = env::get(variable);
  return override_file != nullptr && *override_file != '\0' ? override_file : standard;
}

// ---- NVML (the declarations of the few calls used, from NVIDIA's documented C API) ----

using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned gpu, memory;
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlTemperatureGpu = 0;
constexpr int kNvmlClockSm = 1, kNvmlClockMem = 2;

class NvmlReader final : public GpuReader {
 public:
  explicit NvmlReader(std::unique_ptr<Library> lib) : lib_(std::move(lib)) {
    init_ = lib_->symbol<int (*)()>("nvmlInit_v2");
    shutdown_ = lib_->symbol<int (*)()>("nvmlShutdown");
    count_fn_ = lib_->symbol<int (*)(unsigned*)>("nvmlDeviceGetCount_v2");
    handle_ = lib_->symbol<int (*)(unsigned, NvmlDevice*)>("nvmlDeviceGetHandleByIndex_v2");
    name_ = lib_->symbol<int (*)(NvmlDevice, char*, unsigned)>("nvmlDeviceGetName");
    utilization_ =
        lib_->symbol<int (*)(NvmlDevice, NvmlUtilization*)>("nvmlDeviceGetUtilizationRates");
    memory_ = lib_->symbol<int (*)(NvmlDevice, NvmlMemory*)>("nvmlDeviceGetMemoryInfo");
    power_ = lib_->symbol<int (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetPowerUsage");
    temperature_ = lib_->symbol<int (*)(NvmlDevice, int, unsigned*)>("nvmlDeviceGetTemperature");
    clock_ = lib_->symbol<int (*)(NvmlDevice, int, unsigned*)>("nvmlDeviceGetClockInfo");
  }
  ~NvmlReader() override {
    if (started_ && shutdown_ != nullptr) shutdown_();
  }
  // False (with the reason) when the library lacks the calls or reports no GPU.
  bool start(std::string& why_not) {
    if (init_ == nullptr || count_fn_ == nullptr || handle_ == nullptr) {
      why_not = "NVML lacks nvmlInit_v2 / nvmlDeviceGetCount_v2 / nvmlDeviceGetHandleByIndex_v2";
      return false;
    }
    if (const int rc = init_(); rc != kNvmlSuccess) {
      why_not = fmt::format("nvmlInit_v2 returned {}", rc);
      return false;
    }
    started_ = true;
    unsigned n = 0;
    if (count_fn_(&n) != kNvmlSuccess || n == 0) {
      why_not = "NVML reports no GPU";
      return false;
    }
    count_ = int(n);
    return true;
  }
  const char* library() const override { return "NVML"; }
  int count() const override { return count_; }
  GpuReading read(int index) override {
    GpuReading r;
    r.index = index;
    NvmlDevice dev = nullptr;
    if (handle_(unsigned(index), &dev) != kNvmlSuccess) return r;
    char name[96] = {};
    if (name_ != nullptr && name_(dev, name, sizeof name) == kNvmlSuccess) r.name = name;
    NvmlUtilization u{};
    if (utilization_ != nullptr && utilization_(dev, &u) == kNvmlSuccess) r.utilization_pct = u.gpu;
    NvmlMemory m{};
    if (memory_ != nullptr && memory_(dev, &m) == kNvmlSuccess) {
      r.memory_used_mib = double(m.used) / kMiB;
      r.memory_total_mib = double(m.total) / kMiB;
    }
    unsigned v = 0;
    if (power_ != nullptr && power_(dev, &v) == kNvmlSuccess) r.power_w = v / 1000.0;  // mW
    if (temperature_ != nullptr && temperature_(dev, kNvmlTemperatureGpu, &v) == kNvmlSuccess)
      r.temperature_c = v;
    if (clock_ != nullptr && clock_(dev, kNvmlClockSm, &v) == kNvmlSuccess) r.sm_clock_mhz = v;
    if (clock_ != nullptr && clock_(dev, kNvmlClockMem, &v) == kNvmlSuccess) r.memory_clock_mhz = v;
    return r;
  }

 private:
  std::unique_ptr<Library> lib_;
  bool started_ = false;
  int count_ = 0;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_fn_)(unsigned*) = nullptr;
  int (*handle_)(unsigned, NvmlDevice*) = nullptr;
  int (*name_)(NvmlDevice, char*, unsigned) = nullptr;
  int (*utilization_)(NvmlDevice, NvmlUtilization*) = nullptr;
  int (*memory_)(NvmlDevice, NvmlMemory*) = nullptr;
  int (*power_)(NvmlDevice, unsigned*) = nullptr;
  int (*temperature_)(NvmlDevice, int, unsigned*) = nullptr;
  int (*clock_)(NvmlDevice, int, unsigned*) = nullptr;
};

// ---- ROCm SMI (the declarations of the calls used, from AMD's documented C API) ----

constexpr int kRsmiSuccess = 0;
constexpr uint32_t kRsmiMemVram = 0, kRsmiTempEdge = 0, kRsmiTempCurrent = 0;

class RocmSmiReader final : public GpuReader {
 public:
  explicit RocmSmiReader(std::unique_ptr<Library> lib) : lib_(std::move(lib)) {
    init_ = lib_->symbol<int (*)(uint64_t)>("rsmi_init");
    shutdown_ = lib_->symbol<int (*)()>("rsmi_shut_down");
    count_fn_ = lib_->symbol<int (*)(uint32_t*)>("rsmi_num_monitor_devices");
    name_ = lib_->symbol<int (*)(uint32_t, char*, size_t)>("rsmi_dev_name_get");
    busy_ = lib_->symbol<int (*)(uint32_t, uint32_t*)>("rsmi_dev_busy_percent_get");
    memory_total_ =
        lib_->symbol<int (*)(uint32_t, uint32_t, uint64_t*)>("rsmi_dev_memory_total_get");
    memory_used_ =
        lib_->symbol<int (*)(uint32_t, uint32_t, uint64_t*)>("rsmi_dev_memory_usage_get");
    power_ave_ = lib_->symbol<int (*)(uint32_t, uint32_t, uint64_t*)>("rsmi_dev_power_ave_get");
    // MI300-class GPUs report the socket's current power instead of an average.
    power_socket_ = lib_->symbol<int (*)(uint32_t, uint64_t*)>("rsmi_dev_current_socket_power_get");
    temperature_ =
        lib_->symbol<int (*)(uint32_t, uint32_t, uint32_t, int64_t*)>("rsmi_dev_temp_metric_get");
  }
  ~RocmSmiReader() override {
    if (started_ && shutdown_ != nullptr) shutdown_();
  }
  bool start(std::string& why_not) {
    if (init_ == nullptr || count_fn_ == nullptr) {
      why_not = "the ROCm SMI library lacks rsmi_init / rsmi_num_monitor_devices";
      return false;
    }
    if (const int rc = init_(0); rc != kRsmiSuccess) {
      why_not = fmt::format("rsmi_init returned {}", rc);
      return false;
    }
    started_ = true;
    uint32_t n = 0;
    if (count_fn_(&n) != kRsmiSuccess || n == 0) {
      why_not = "ROCm SMI reports no GPU";
      return false;
    }
    count_ = int(n);
    return true;
  }
  const char* library() const override { return "ROCm SMI"; }
  int count() const override { return count_; }
  GpuReading read(int index) override {
    GpuReading r;
    r.index = index;
    const auto i = uint32_t(index);
    char name[96] = {};
    if (name_ != nullptr && name_(i, name, sizeof name) == kRsmiSuccess) r.name = name;
    uint32_t busy = 0;
    if (busy_ != nullptr && busy_(i, &busy) == kRsmiSuccess) r.utilization_pct = busy;
    uint64_t v = 0;
    if (memory_used_ != nullptr && memory_used_(i, kRsmiMemVram, &v) == kRsmiSuccess)
      r.memory_used_mib = double(v) / kMiB;
    if (memory_total_ != nullptr && memory_total_(i, kRsmiMemVram, &v) == kRsmiSuccess)
      r.memory_total_mib = double(v) / kMiB;
    if ((power_ave_ != nullptr && power_ave_(i, 0, &v) == kRsmiSuccess) ||
        (power_socket_ != nullptr && power_socket_(i, &v) == kRsmiSuccess))
      r.power_w = double(v) / 1e6;  // microwatts
    int64_t t = 0;
    if (temperature_ != nullptr &&
        temperature_(i, kRsmiTempEdge, kRsmiTempCurrent, &t) == kRsmiSuccess)
      r.temperature_c = double(t) / 1000.0;  // millidegrees
    return r;
  }

 private:
  std::unique_ptr<Library> lib_;
  bool started_ = false;
  int count_ = 0;
  int (*init_)(uint64_t) = nullptr;
  int (*shutdown_)() = nullptr;
  int (*count_fn_)(uint32_t*) = nullptr;
  int (*name_)(uint32_t, char*, size_t) = nullptr;
  int (*busy_)(uint32_t, uint32_t*) = nullptr;
  int (*memory_total_)(uint32_t, uint32_t, uint64_t*) = nullptr;
  int (*memory_used_)(uint32_t, uint32_t, uint64_t*) = nullptr;
  int (*power_ave_)(uint32_t, uint32_t, uint64_t*) = nullptr;
  int (*power_socket_)(uint32_t, uint64_t*) = nullptr;
  int (*temperature_)(uint32_t, uint32_t, uint32_t, int64_t*) = nullptr;
};

}  // namespace

GpuReading::GpuReading()
    : utilization_pct(kNaN),
      memory_used_mib(kNaN),
      memory_total_mib(kNaN),
      power_w(kNaN),
      temperature_c(kNaN),
      sm_clock_mhz(kNaN),
      memory_clock_mhz(kNaN) {}

HostReading::HostReading()
    : cpu_pct(kNaN), memory_used_mib(kNaN), memory_total_mib(kNaN), process_rss_mib(kNaN) {}

std::unique_ptr<GpuReader> open_gpu_reader(std::string* why_not) {
  std::vector<std::string> tried;
  {
    auto lib =
        std::make_unique<Library>(library_file("HOURGLASS_NVML_LIBRARY", "libnvidia-ml.so.1"));
    if (lib->loaded()) {
      auto reader = std::make_unique<NvmlReader>(std::move(lib));
      std::string why;
      if (reader->start(why)) return reader;
      tried.push_back(why);
    } else {
      tried.push_back("NVML: " + lib->error());
    }
  }
  {
    auto lib =
        std::make_unique<Library>(library_file("HOURGLASS_ROCM_SMI_LIBRARY", "librocm_smi64.so"));
    if (lib->loaded()) {
      auto reader = std::make_unique<RocmSmiReader>(std::move(lib));
      std::string why;
      if (reader->start(why)) return reader;
      tried.push_back(why);
    } else {
      tried.push_back("ROCm SMI: " + lib->error());
    }
  }
  if (why_not != nullptr) {
    *why_not = "no GPU readings";
    for (size_t i = 0; i < tried.size(); ++i) *why_not += (i == 0 ? " (" : "; ") + tried[i];
    *why_not += ")";
  }
  return nullptr;
}

HostReading HostReader::read() {
  HostReading r;
  {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal &&
        cpu == "cpu") {
      const uint64_t busy = user + nice + system + irq + softirq + steal;
      const uint64_t total = busy + idle + iowait;
      if (total_ != 0 && total > total_)
        r.cpu_pct = 100.0 * double(busy - busy_) / double(total - total_);
      busy_ = busy;
      total_ = total;
    }
  }
  {
    std::ifstream meminfo("/proc/meminfo");
    std::string key, unit;
    double value = 0, total_kib = kNaN, available_kib = kNaN;
    while (meminfo >> key >> value >> unit) {
      if (key == "MemTotal:") total_kib = value;
      if (key == "MemAvailable:") available_kib = value;
    }
    r.memory_total_mib = total_kib / 1024.0;
    r.memory_used_mib = (total_kib - available_kib) / 1024.0;
  }
  {
    std::ifstream statm("/proc/self/statm");
    double size = 0, resident = 0;
    if (statm >> size >> resident)
      r.process_rss_mib = resident * double(::sysconf(_SC_PAGESIZE)) / kMiB;
  }
  return r;
}

}  // namespace hg
