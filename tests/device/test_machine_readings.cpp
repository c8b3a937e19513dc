// GPU readings through NVML, AMD SMI and ROCm SMI, each exercised through a fake library with fixed
// readings (tests/device/fakes/, loaded with the HOURGLASS_*_LIBRARY variables), the absent
// libraries, and the host's readings from /proc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "hourglass/device/machine_readings.h"

namespace hg {
namespace {

// Sets the library variables for one test and restores them after.
struct LibraryFiles {
  LibraryFiles(const char* nvml, const char* amd_smi, const char* rocm_smi) {
    ::setenv("HOURGLASS_NVML_LIBRARY", nvml, 1);
    ::setenv("HOURGLASS_AMD_SMI_LIBRARY", amd_smi, 1);
    ::setenv("HOURGLASS_ROCM_SMI_LIBRARY", rocm_smi, 1);
  }
  ~LibraryFiles() {
    ::unsetenv("HOURGLASS_NVML_LIBRARY");
    ::unsetenv("HOURGLASS_AMD_SMI_LIBRARY");
    ::unsetenv("HOURGLASS_ROCM_SMI_LIBRARY");
  }
};

constexpr const char* kNoNvml = "/nonexistent/libnvidia-ml.so.1";
constexpr const char* kNoAmdSmi = "/nonexistent/libamd_smi.so";
constexpr const char* kNoRocmSmi = "/nonexistent/librocm_smi64.so";

TEST(MachineReadings, NvmlReadingsInTheirUnits) {
  LibraryFiles files(HG_FAKE_NVML, kNoAmdSmi, kNoRocmSmi);
  std::string why_not;
  std::unique_ptr<GpuReader> gpus = open_gpu_reader(&why_not);
  ASSERT_NE(gpus, nullptr) << why_not;
  EXPECT_STREQ(gpus->library(), "NVML");
  ASSERT_EQ(gpus->count(), 2);
  const GpuReading a = gpus->read(0), b = gpus->read(1);
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(a.name, "Fake GPU 0");
  EXPECT_EQ(b.name, "Fake GPU 1");
  EXPECT_DOUBLE_EQ(a.utilization_pct, 40);
  EXPECT_DOUBLE_EQ(b.utilization_pct, 90);
  EXPECT_DOUBLE_EQ(a.memory_total_mib, 80 * 1024);
  EXPECT_DOUBLE_EQ(a.memory_used_mib, 8 * 1024);
  EXPECT_DOUBLE_EQ(b.memory_used_mib, 16 * 1024);
  EXPECT_DOUBLE_EQ(a.power_w, 312.5);
  EXPECT_DOUBLE_EQ(a.temperature_c, 47);
  EXPECT_DOUBLE_EQ(a.sm_clock_mhz, 1980);
  EXPECT_DOUBLE_EQ(a.memory_clock_mhz, 2619);
}

// AMD SMI comes before ROCm SMI; its power is the energy counter's mean since the last reading.
TEST(MachineReadings, AmdSmiReadingsInTheirUnitsAndBeforeRocmSmi) {
  LibraryFiles files(kNoNvml, HG_FAKE_AMD_SMI, HG_FAKE_ROCM_SMI);
  std::string why_not;
  std::unique_ptr<GpuReader> gpus = open_gpu_reader(&why_not);
  ASSERT_NE(gpus, nullptr) << why_not;
  EXPECT_STREQ(gpus->library(), "AMD SMI");
  ASSERT_EQ(gpus->count(), 1);  // the socket's CPU is not listed
  const GpuReading r = gpus->read(0);
  EXPECT_EQ(r.name, "Fake Instinct MI355X");
  EXPECT_DOUBLE_EQ(r.utilization_pct, 64);
  EXPECT_DOUBLE_EQ(r.memory_total_mib, 288 * 1024);
  EXPECT_DOUBLE_EQ(r.memory_used_mib, 36 * 1024);
  EXPECT_TRUE(std::isnan(r.power_w));  // no earlier energy reading
  EXPECT_DOUBLE_EQ(r.temperature_c, 48);
  EXPECT_DOUBLE_EQ(r.sm_clock_mhz, 2400);
  EXPECT_DOUBLE_EQ(r.memory_clock_mhz, 1900);
  EXPECT_NEAR(gpus->read(0).power_w, 600, 1e-9);
}

TEST(MachineReadings, RocmSmiReadingsInTheirUnits) {
  LibraryFiles files(kNoNvml, kNoAmdSmi, HG_FAKE_ROCM_SMI);
  std::string why_not;
  std::unique_ptr<GpuReader> gpus = open_gpu_reader(&why_not);
  ASSERT_NE(gpus, nullptr) << why_not;
  EXPECT_STREQ(gpus->library(), "ROCm SMI");
  ASSERT_EQ(gpus->count(), 1);
  const GpuReading r = gpus->read(0);
  EXPECT_EQ(r.name, "Fake Instinct");
  EXPECT_DOUBLE_EQ(r.utilization_pct, 73);
  EXPECT_DOUBLE_EQ(r.memory_total_mib, 192 * 1024);
  EXPECT_DOUBLE_EQ(r.memory_used_mib, 24 * 1024);
  EXPECT_DOUBLE_EQ(r.power_w, 550);  // the socket power: the average is not supported
  EXPECT_DOUBLE_EQ(r.temperature_c, 51.5);
  EXPECT_TRUE(std::isnan(r.sm_clock_mhz));  // not read on AMD
}

TEST(MachineReadings, AbsentLibrariesGiveNoReaderAndSayWhatWasTried) {
  LibraryFiles files(kNoNvml, kNoAmdSmi, kNoRocmSmi);
  std::string why_not;
  EXPECT_EQ(open_gpu_reader(&why_not), nullptr);
  EXPECT_NE(why_not.find("NVML"), std::string::npos) << why_not;
  EXPECT_NE(why_not.find("AMD SMI"), std::string::npos) << why_not;
  EXPECT_NE(why_not.find("ROCm SMI"), std::string::npos) << why_not;
}

TEST(MachineReadings, HostReadingsAreSane) {
  HostReader host;
  const HostReading first = host.read();
  EXPECT_TRUE(std::isnan(first.cpu_pct));  // no earlier reading to compare with
  EXPECT_GT(first.memory_total_mib, 0);
  EXPECT_GT(first.memory_used_mib, 0);
  EXPECT_LE(first.memory_used_mib, first.memory_total_mib);
  EXPECT_GT(first.process_rss_mib, 0);
  volatile double spin = 0;
  for (int i = 0; i < 20000000; ++i) spin = spin + 1;  // some CPU time between the readings
  const HostReading second = host.read();
  if (std::isfinite(second.cpu_pct)) {  // NaN only when no jiffy passed
    EXPECT_GE(second.cpu_pct, 0);
    EXPECT_LE(second.cpu_pct, 100);
  }
}

}  // namespace
}  // namespace hg
