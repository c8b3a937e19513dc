#include "support/gpu.h"

#include "hourglass/device/device.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#endif

namespace hg::test {

bool gpu_available() { return gpu_unavailable_reason().empty(); }

std::string gpu_unavailable_reason() {
  static const std::string reason = hg::gpu_unavailable_reason();
  return reason;
}

namespace {
void set_poison(bool on) {
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(on);
#else
  (void)on;
#endif
}
}  // namespace

PoisonGuard::PoisonGuard() { set_poison(true); }
PoisonGuard::~PoisonGuard() { set_poison(false); }

}  // namespace hg::test
