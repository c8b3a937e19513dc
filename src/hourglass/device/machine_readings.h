// Readings of the machine a run uses: each GPU's utilisation, memory, power, temperature and
// clocks, through NVML on NVIDIA and AMD SMI (else ROCm SMI) on AMD, and the host's CPU and
// memory from /proc. The GPU libraries are opened with dlopen when a reader is made, never
// linked, so a build or a machine without them still runs (the reader is then absent, with the
// reason); their versioned file names are tried first (amd_gpu_library_calls.h declares AMD's
// calls). HOURGLASS_NVML_LIBRARY, HOURGLASS_AMD_SMI_LIBRARY and HOURGLASS_ROCM_SMI_LIBRARY name
// another library file to open (tests load a fake one this way).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hg {

// One GPU's state; NaN where the library does not report a value.
struct GpuReading {
  int index = 0;
  std::string name;
  double utilization_pct;  // share of the last sample period a kernel ran
  double memory_used_mib, memory_total_mib;
  double power_w, temperature_c;
  double sm_clock_mhz, memory_clock_mhz;
  GpuReading();
};

class GpuReader {
 public:
  virtual ~GpuReader() = default;
  virtual const char* library() const = 0;  // "NVML", "AMD SMI", "ROCm SMI"
  virtual int count() const = 0;
  // The GPU `index` (0 <= index < count()) now.
  virtual GpuReading read(int index) = 0;
};

// NVML, else AMD SMI, else ROCm SMI; null when none loads or reports a GPU, with `why_not` (when
// given) saying what was tried.
std::unique_ptr<GpuReader> open_gpu_reader(std::string* why_not = nullptr);

struct HostReading {
  double cpu_pct;  // all cores busy = 100, over the time since the previous reading (NaN first)
  double memory_used_mib, memory_total_mib;  // MemTotal - MemAvailable, MemTotal
  double process_rss_mib;                    // this process's resident memory
  HostReading();
};

class HostReader {
 public:
  HostReading read();

 private:
  uint64_t busy_ = 0, total_ = 0;  // /proc/stat jiffies at the previous reading
};

}  // namespace hg
