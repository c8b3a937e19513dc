// backend_for(): the CPU backend always, the GPU backend when one is built.
#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/ops/backend.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/gpu_backend.h"
#endif

namespace hg {

Backend& backend_for(Device device) {
  if (device.is_cpu()) {
    static CpuBackend cpu;
    return cpu;
  }
#ifdef HOURGLASS_HAS_GPU
  return gpu_backend();
#else
  throw_invalid(fmt::format("no backend for device {} in this build", device.str()),
                "use device = \"cpu\", or rebuild with -DHOURGLASS_GPU=cuda or hip");
#endif
}

}  // namespace hg
