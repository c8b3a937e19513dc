// What the GPU stack of this machine is: the devices the runtime sees (name, architecture,
// memory, caches, clocks) and the runtime and driver versions, for `hourglass info`,
// `hourglass doctor` and the planner. Plain C++: includes no vendor header, so the CLI and the
// tests can use it without the CUDA/HIP include directories.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hg::gpu {

struct GpuDeviceInfo {
  int index = 0;
  std::string name;         // "NVIDIA H200"
  std::string arch;         // "sm_90"; on AMD the gfx name, "gfx942"
  int multiprocessors = 0;  // SMs (NVIDIA) or CUs (AMD)
  size_t memory_total = 0;  // bytes
  size_t memory_free = 0;   // bytes, at the time of the query
  size_t l2_bytes = 0;
  int clock_mhz = 0;         // peak SM clock
  int memory_clock_mhz = 0;  // peak memory clock
  int memory_bus_bits = 0;
  int compute_major = 0, compute_minor = 0;
  std::string pci_bus_id;  // "0000:19:00.0"; "" when unknown
};

// Every device the runtime sees, in runtime order (empty when there is none or no driver).
// Queries memory with gpuMemGetInfo, which creates the device's context.
std::vector<GpuDeviceInfo> list_devices();
// Device `index`'s properties and attributes alone (no memory query, the current device
// unchanged; memory_free stays 0). Throws when the runtime cannot answer.
GpuDeviceInfo device_properties(int index);

struct GpuRuntimeInfo {
  std::string backend;         // "cuda" or "hip"
  int runtime_version = 0;     // as reported: CUDA 1000*major + 10*minor, HIP 10^7*major + ...
  int driver_version = 0;      // newest runtime the installed driver supports; 0: no driver
                               // (AMD: 0 when the amdgpu module is not loaded, since
                               // hipDriverGetVersion reports the runtime's version anyway)
  std::string runtime;         // "13.0"
  std::string driver;          // "13.0", or "none" without a driver
  std::string driver_release;  // the kernel driver's release ("580.65.06") read through NVML
                               // at run time, or the amdgpu module's version from sysfs; ""
                               // when it cannot be read (no NVML, in-tree amdgpu)
  std::vector<std::string> kernel_gpus;  // AMD: the GPUs of the KFD topology ("node 1 gfx90a",
                                         // amdgpu_probe.h); empty on NVIDIA
  std::string device_query_error;        // gpuGetDeviceCount's error ("" when it succeeded)
  bool driver_too_old = false;           // the runtime refused the driver as older than itself
  bool no_device = false;  // the runtime finds no device: it counts 0, reports no device, or
                           // has no driver to ask (not one too old)
};

// The runtime this build uses and the driver the machine has. Never throws.
GpuRuntimeInfo runtime_info();

namespace detail {
// The kernel driver's release: NVIDIA through NVML, opened with dlopen at run time (never
// linked: CI machines have no driver; device_info_nvml.cpp), AMD from the amdgpu module's
// sysfs entry. "" when it cannot be read.
std::string kernel_driver_release();
}  // namespace detail

}  // namespace hg::gpu
