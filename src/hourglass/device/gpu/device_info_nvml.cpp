// The NVIDIA kernel driver's release string through NVML, opened with dlopen at run time:
// linking libnvidia-ml.so.1 would stop the binary from starting on machines without the driver
// (CI, CPU-only hosts). Anything missing degrades to "".
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "hourglass/device/gpu/device_info.h"

namespace hg::gpu::detail {

namespace {

using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlSystemGetDriverVersion = int (*)(char*, unsigned);
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvmlVersionLength = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

std::string query_driver_release() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "";
  std::string release;
  auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlShutdown>(dlsym(lib, "nvmlShutdown"));
  auto version =
      reinterpret_cast<NvmlSystemGetDriverVersion>(dlsym(lib, "nvmlSystemGetDriverVersion"));
  if (init && shutdown && version && init() == kNvmlSuccess) {
    char text[kNvmlVersionLength] = {};
    if (version(text, kNvmlVersionLength) == kNvmlSuccess) release = text;
    shutdown();
  }
  dlclose(lib);
  return release;
}

}  // namespace

std::string kernel_driver_release() {
  static std::once_flag once;
  static std::string release;
  std::call_once(once, [] { release = query_driver_release(); });
  return release;
}

}  // namespace hg::gpu::detail
