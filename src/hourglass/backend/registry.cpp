// backend_for(): the CPU backend always, a GPU backend when one is built.
#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/ops/backend.h"

namespace hg {

Backend& backend_for(Device device) {
  if (device.is_cpu()) {
    static CpuBackend cpu;
    return cpu;
  }
  throw_invalid(fmt::format("no backend for device {} in this build", device.str()),
                "use device = \"cpu\", or rebuild with -DHOURGLASS_GPU=cuda or hip");
}

}  // namespace hg
