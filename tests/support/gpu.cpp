#include "support/gpu.h"

#include "hourglass/device/device.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/side_stream_delay.h"
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

void set_side_stream_delay(int64_t cycles) {
#ifdef HOURGLASS_HAS_GPU
  gpu::set_side_stream_delay_for_testing(cycles);
#else
  (void)cycles;
#endif
}
}  // namespace

PoisonGuard::PoisonGuard() { set_poison(true); }
PoisonGuard::~PoisonGuard() { set_poison(false); }

SideStreamDelayGuard::SideStreamDelayGuard(int64_t cycles) { set_side_stream_delay(cycles); }
SideStreamDelayGuard::~SideStreamDelayGuard() { set_side_stream_delay(0); }

}  // namespace hg::test
