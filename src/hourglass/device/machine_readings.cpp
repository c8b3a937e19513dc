#include "hourglass/device/machine_readings.h"
#include "hourglass/base/environment.h"
#include "hourglass/device/amd_gpu_library_calls.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

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

// The first of `names` that dlopen opens, or the file `variable` names instead when it is set
// (tests name a fake one); not loaded (with the last error) when none opens.
std::unique_ptr<Library> open_library(const char* variable,
                                      std::initializer_list<const char*> names) {
  const char* override_file = env::get(variable);
  if (override_file != nullptr && *override_file != '\0')
    return std::make_unique<Library>(override_file);
  std::unique_ptr<Library> lib;
  for (const char* name : names) {
    lib = std::make_unique<Library>(name);
    if (lib->loaded()) break;
  }
  return lib;
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

// ---- AMD SMI (amd_gpu_library_calls.h) ----

class AmdSmiReader final : public GpuReader {
 public:
  explicit AmdSmiReader(std::unique_ptr<Library> lib) : lib_(std::move(lib)) {
    init_ = lib_->symbol<amd_smi::Init>("amdsmi_init");
    shutdown_ = lib_->symbol<amd_smi::ShutDown>("amdsmi_shut_down");
    sockets_ = lib_->symbol<amd_smi::SocketHandles>("amdsmi_get_socket_handles");
    processors_ = lib_->symbol<amd_smi::ProcessorHandles>("amdsmi_get_processor_handles");
    type_ = lib_->symbol<amd_smi::ProcessorType>("amdsmi_get_processor_type");
    asic_ = lib_->symbol<amd_smi::AsicInfo>("amdsmi_get_gpu_asic_info");
    activity_ = lib_->symbol<amd_smi::Activity>("amdsmi_get_gpu_activity");
    memory_total_ = lib_->symbol<amd_smi::Memory>("amdsmi_get_gpu_memory_total");
    memory_used_ = lib_->symbol<amd_smi::Memory>("amdsmi_get_gpu_memory_usage");
    energy_ = lib_->symbol<amd_smi::EnergyCount>("amdsmi_get_energy_count");
    temperature_ = lib_->symbol<amd_smi::Temperature>("amdsmi_get_temp_metric");
    clock_ = lib_->symbol<amd_smi::ClockInfo>("amdsmi_get_clock_info");
  }
  ~AmdSmiReader() override {
    if (started_ && shutdown_ != nullptr) shutdown_();
  }
  bool start(std::string& why_not) {
    if (init_ == nullptr || sockets_ == nullptr || processors_ == nullptr) {
      why_not =
          "AMD SMI lacks amdsmi_init / amdsmi_get_socket_handles / "
          "amdsmi_get_processor_handles";
      return false;
    }
    if (const int rc = init_(amd_smi::kInitAmdGpus); rc != amd_smi::kSuccess) {
      why_not = fmt::format("amdsmi_init returned {}", rc);
      return false;
    }
    started_ = true;
    for (amd_smi::Handle socket :
         handles([&](uint32_t*n, amd_smi::Handle*h) { return sockets_(n, h); })) {
      for (amd_smi::Handle p :
           handles([&](uint32_t*n, amd_smi::Handle*h) { return processors_(socket, n, h); })) {
        uint32_t type = amd_smi::kProcessorAmdGpu;
        if (type_ != nullptr && type_(p, &type) != amd_smi::kSuccess) continue;
        if (type == amd_smi::kProcessorAmdGpu) gpus_.push_back(p);
      }
    }
    if (gpus_.empty()) {
      why_not = "AMD SMI reports no GPU";
      return false;
    }
    previous_energy_.assign(gpus_.size(), {});
    return true;
  }
  const char* library() const override { return "AMD SMI"; }
  int count() const override { return int(gpus_.size()); }
  GpuReading read(int index) override {
    GpuReading r;
    r.index = index;
    const amd_smi::Handle gpu = gpus_[size_t(index)];
    alignas(8) unsigned char bytes[amd_smi::kStructBytes] = {};
    if (asic_ != nullptr && asic_(gpu, bytes) == amd_smi::kSuccess)
      r.name.assign(reinterpret_cast<const char*>(bytes),
                    strnlen(reinterpret_cast<const char*>(bytes), amd_smi::kNameBytes));
    uint32_t u32 = 0;
    std::memset(bytes, 0, sizeof bytes);
    if (activity_ != nullptr && activity_(gpu, bytes) == amd_smi::kSuccess) {
      std::memcpy(&u32, bytes, sizeof u32);  // gfx_activity, percent
      r.utilization_pct = u32;
    }
    uint64_t v = 0;
    if (memory_used_ != nullptr && memory_used_(gpu, amd_smi::kMemoryVram, &v) == amd_smi::kSuccess)
      r.memory_used_mib = double(v) / kMiB;
    if (memory_total_ != nullptr &&
        memory_total_(gpu, amd_smi::kMemoryVram, &v) == amd_smi::kSuccess)
      r.memory_total_mib = double(v) / kMiB;
    r.power_w = power_w(size_t(index));
    int64_t t = 0;
    if (temperature_ != nullptr &&
        temperature_(gpu, amd_smi::kTemperatureEdge, amd_smi::kTemperatureCurrent, &t) ==
            amd_smi::kSuccess)
      r.temperature_c = double(t);
    for (const auto& [clock, field] :
         {std::pair{amd_smi::kClockGfx, &GpuReading::sm_clock_mhz},
          std::pair{amd_smi::kClockMemory, &GpuReading::memory_clock_mhz}}) {
      std::memset(bytes, 0, sizeof bytes);
      if (clock_ != nullptr && clock_(gpu, clock, bytes) == amd_smi::kSuccess) {
        std::memcpy(&u32, bytes, sizeof u32);  // clk, MHz
        r.*field = u32;
      }
    }
    return r;
  }

 private:
  struct Energy {
    uint64_t count = 0, timestamp_ns = 0;
    bool valid = false;
  };
  // A list of handles from a call that first gives the count (with a null array), then fills it.
  template <typename Call>
  static std::vector<amd_smi::Handle> handles(Call call) {
    uint32_t n = 0;
    if (call(&n, nullptr) != amd_smi::kSuccess || n == 0) return {};
    std::vector<amd_smi::Handle> out(n);
    if (call(&n, out.data()) != amd_smi::kSuccess) return {};
    out.resize(std::min<size_t>(n, out.size()));
    return out;
  }
  // AMD SMI gives power as an energy counter: the mean power since the previous reading of this
  // GPU (NaN at the first).
  double power_w(size_t index) {
    uint64_t count = 0, timestamp_ns = 0;
    float resolution_uj = 0;
    if (energy_ == nullptr ||
        energy_(gpus_[index], &count, &resolution_uj, &timestamp_ns) != amd_smi::kSuccess)
      return kNaN;
    Energy& before = previous_energy_[index];
    double watts = kNaN;
    if (before.valid && timestamp_ns > before.timestamp_ns && count >= before.count)
      watts = double(count - before.count) * double(resolution_uj) * 1e-6 /
              (double(timestamp_ns - before.timestamp_ns) * 1e-9);
    before = {count, timestamp_ns, true};
    return watts;
  }

  std::unique_ptr<Library> lib_;
  bool started_ = false;
  std::vector<amd_smi::Handle> gpus_;
  std::vector<Energy> previous_energy_;
  amd_smi::Init init_ = nullptr;
  amd_smi::ShutDown shutdown_ = nullptr;
  amd_smi::SocketHandles sockets_ = nullptr;
  amd_smi::ProcessorHandles processors_ = nullptr;
  amd_smi::ProcessorType type_ = nullptr;
  amd_smi::AsicInfo asic_ = nullptr;
  amd_smi::Activity activity_ = nullptr;
  amd_smi::Memory memory_total_ = nullptr;
  amd_smi::Memory memory_used_ = nullptr;
  amd_smi::EnergyCount energy_ = nullptr;
  amd_smi::Temperature temperature_ = nullptr;
  amd_smi::ClockInfo clock_ = nullptr;
};

// ---- ROCm SMI (amd_gpu_library_calls.h) ----

class RocmSmiReader final : public GpuReader {
 public:
  explicit RocmSmiReader(std::unique_ptr<Library> lib) : lib_(std::move(lib)) {
    init_ = lib_->symbol<rocm_smi::Init>("rsmi_init");
    shutdown_ = lib_->symbol<rocm_smi::ShutDown>("rsmi_shut_down");
    count_fn_ = lib_->symbol<rocm_smi::DeviceCount>("rsmi_num_monitor_devices");
    name_ = lib_->symbol<rocm_smi::Name>("rsmi_dev_name_get");
    busy_ = lib_->symbol<rocm_smi::Busy>("rsmi_dev_busy_percent_get");
    memory_total_ = lib_->symbol<rocm_smi::Memory>("rsmi_dev_memory_total_get");
    memory_used_ = lib_->symbol<rocm_smi::Memory>("rsmi_dev_memory_usage_get");
    power_ave_ = lib_->symbol<rocm_smi::PowerAverage>("rsmi_dev_power_ave_get");
    power_socket_ = lib_->symbol<rocm_smi::SocketPower>("rsmi_dev_current_socket_power_get");
    temperature_ = lib_->symbol<rocm_smi::Temperature>("rsmi_dev_temp_metric_get");
  }
  ~RocmSmiReader() override {
    if (started_ && shutdown_ != nullptr) shutdown_();
  }
  bool start(std::string& why_not) {
    if (init_ == nullptr || count_fn_ == nullptr) {
      why_not = "the ROCm SMI library lacks rsmi_init / rsmi_num_monitor_devices";
      return false;
    }
    if (const int rc = init_(0); rc != rocm_smi::kSuccess) {
      why_not = fmt::format("rsmi_init returned {}", rc);
      return false;
    }
    started_ = true;
    uint32_t n = 0;
    if (count_fn_(&n) != rocm_smi::kSuccess || n == 0) {
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
    if (name_ != nullptr && name_(i, name, sizeof name) == rocm_smi::kSuccess) r.name = name;
    uint32_t busy = 0;
    if (busy_ != nullptr && busy_(i, &busy) == rocm_smi::kSuccess) r.utilization_pct = busy;
    uint64_t v = 0;
    if (memory_used_ != nullptr && memory_used_(i, rocm_smi::kMemoryVram, &v) == rocm_smi::kSuccess)
      r.memory_used_mib = double(v) / kMiB;
    if (memory_total_ != nullptr &&
        memory_total_(i, rocm_smi::kMemoryVram, &v) == rocm_smi::kSuccess)
      r.memory_total_mib = double(v) / kMiB;
    if ((power_ave_ != nullptr && power_ave_(i, 0, &v) == rocm_smi::kSuccess) ||
        (power_socket_ != nullptr && power_socket_(i, &v) == rocm_smi::kSuccess))
      r.power_w = double(v) / 1e6;  // microwatts
    int64_t t = 0;
    if (temperature_ != nullptr &&
        temperature_(i, rocm_smi::kTemperatureEdge, rocm_smi::kTemperatureCurrent, &t) ==
            rocm_smi::kSuccess)
      r.temperature_c = double(t) / 1000.0;  // millidegrees
    return r;
  }

 private:
  std::unique_ptr<Library> lib_;
  bool started_ = false;
  int count_ = 0;
  rocm_smi::Init init_ = nullptr;
  rocm_smi::ShutDown shutdown_ = nullptr;
  rocm_smi::DeviceCount count_fn_ = nullptr;
  rocm_smi::Name name_ = nullptr;
  rocm_smi::Busy busy_ = nullptr;
  rocm_smi::Memory memory_total_ = nullptr;
  rocm_smi::Memory memory_used_ = nullptr;
  rocm_smi::PowerAverage power_ave_ = nullptr;
  rocm_smi::SocketPower power_socket_ = nullptr;
  rocm_smi::Temperature temperature_ = nullptr;
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
    auto lib = open_library("HOURGLASS_NVML_LIBRARY", {"libnvidia-ml.so.1"});
    if (lib->loaded()) {
      auto reader = std::make_unique<NvmlReader>(std::move(lib));
      std::string why;
      if (reader->start(why)) return reader;
      tried.push_back(why);
    } else {
      tried.push_back("NVML: " + lib->error());
    }
  }
  // AMD SMI first, ROCm SMI (in maintenance from ROCm 7) as the fallback; each by its versioned
  // names first (the unversioned one comes with the -dev packages only): ROCm's libamd_smi.so.26
  // (ROCm 7) and .so.25 / .so.24 (ROCm 6); ROCm SMI's .so.7 (ROCm 6), .so.6, .so.5 and Debian's
  // .so.1 (librocm-smi64-1).
  {
    auto lib = open_library("HOURGLASS_AMD_SMI_LIBRARY", {"libamd_smi.so.26", "libamd_smi.so.25",
                                                          "libamd_smi.so.24", "libamd_smi.so"});
    if (lib->loaded()) {
      auto reader = std::make_unique<AmdSmiReader>(std::move(lib));
      std::string why;
      if (reader->start(why)) return reader;
      tried.push_back(why);
    } else {
      tried.push_back("AMD SMI: " + lib->error());
    }
  }
  {
    auto lib = open_library("HOURGLASS_ROCM_SMI_LIBRARY",
                            {"librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5",
                             "librocm_smi64.so.1", "librocm_smi64.so"});
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
