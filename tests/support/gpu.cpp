#include "support/gpu.h"

#include "hourglass/device/device.h"

namespace hg::test {

bool gpu_available() { return gpu_unavailable_reason().empty(); }

std::string gpu_unavailable_reason() {
  static const std::string reason = hg::gpu_unavailable_reason();
  return reason;
}

}  // namespace hg::test
