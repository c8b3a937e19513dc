// Device discovery through the runtime's attribute queries (not cudaDeviceProp's clock fields,
// which CUDA 13 removed), and the runtime/driver versions.
#include "hourglass/device/gpu/device_info.h"

#include "hourglass/base/error.h"
#include "hourglass/device/amdgpu_probe.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

namespace {

int attribute(gpuDeviceAttr_t attr, int index) {
  int value = 0;
  if (gpuDeviceGetAttribute(&value, attr, index) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return value;
}

std::string arch_name(const gpuDeviceProp& prop) {
#ifdef HOURGLASS_GPU_HIP
  // "gfx942:sramecc+:xnack-" -> "gfx942"
  std::string name = prop.gcnArchName;
  return name.substr(0, name.find(':'));
#else
  return fmt::format("sm_{}{}", prop.major, prop.minor);
#endif
}

}  // namespace

GpuRuntimeInfo runtime_info() {
  GpuRuntimeInfo info;
  info.backend = kRuntimeName;
  if (gpuRuntimeGetVersion(&info.runtime_version) != gpuSuccess) info.runtime_version = 0;
  if (gpuDriverGetVersion(&info.driver_version) != gpuSuccess) info.driver_version = 0;
  (void)gpuGetLastError();
#ifdef HOURGLASS_GPU_HIP
  // hipDriverGetVersion reports the runtime's own version even when no driver is loaded: the
  // driver is the amdgpu kernel module, and its GPUs are the KFD topology's.
  const AmdgpuProbe probe = probe_amdgpu();
  if (!probe.module_loaded) info.driver_version = 0;
  for (const KfdGpuNode& g : probe.gpus)
    info.kernel_gpus.push_back(fmt::format("node {} {}", g.node, g.gfx_target));
#endif
  info.runtime = runtime_version_text(info.runtime_version);
  info.driver =
      info.driver_version ? runtime_version_text(info.driver_version) : std::string("none");
  int n = 0;
  const gpuError_t err = gpuGetDeviceCount(&n);
  (void)gpuGetLastError();
  if (err != gpuSuccess) {
    info.device_query_error = fmt::format("{}: {}", gpuGetErrorName(err), gpuGetErrorString(err));
    // CUDA reports a missing driver as insufficient too: only a driver that is there is old.
    info.driver_too_old = err == gpuErrorInsufficientDriver && info.driver_version != 0;
  }
  info.no_device = (err == gpuSuccess && n == 0) || err == gpuErrorNoDevice ||
                   (err == gpuErrorInsufficientDriver && info.driver_version == 0);
  try {
    info.driver_release = detail::kernel_driver_release();
  } catch (...) {
    info.driver_release.clear();
  }
  return info;
}

GpuDeviceInfo device_properties(int i) {
  GpuDeviceInfo d;
  d.index = i;
  gpuDeviceProp prop{};
  HG_GPU_CHECK(gpuGetDeviceProperties(&prop, i));
  d.name = prop.name;
  d.arch = arch_name(prop);
  d.compute_major = attribute(gpuDevAttrComputeCapabilityMajor, i);
  d.compute_minor = attribute(gpuDevAttrComputeCapabilityMinor, i);
  d.multiprocessors = attribute(gpuDevAttrMultiProcessorCount, i);
  d.l2_bytes = size_t(attribute(gpuDevAttrL2CacheSize, i));
  d.clock_mhz = attribute(gpuDevAttrClockRate, i) / 1000;  // kHz
  d.memory_clock_mhz = attribute(gpuDevAttrMemoryClockRate, i) / 1000;
  d.memory_bus_bits = attribute(gpuDevAttrMemoryBusWidth, i);
  d.memory_total = prop.totalGlobalMem;
  char bus[32] = {};
  if (gpuDeviceGetPCIBusId(bus, int(sizeof(bus)), i) == gpuSuccess)
    d.pci_bus_id = bus;
  else
    (void)gpuGetLastError();
  return d;
}

std::vector<GpuDeviceInfo> list_devices() {
  std::vector<GpuDeviceInfo> devices;
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    GpuDeviceInfo d = device_properties(i);
    set_device(i);
    size_t free_bytes = 0, total_bytes = 0;
    HG_GPU_CHECK(gpuMemGetInfo(&free_bytes, &total_bytes));
    d.memory_free = free_bytes;
    if (total_bytes) d.memory_total = total_bytes;
    devices.push_back(std::move(d));
  }
  return devices;
}

#ifdef HOURGLASS_GPU_HIP
// No NVML on AMD; the amdgpu kernel module reports its version in sysfs (absent for the
// in-tree module of a distribution kernel).
std::string detail::kernel_driver_release() { return probe_amdgpu().module_version; }
#endif

}  // namespace hg::gpu
