#include "support/gpu.h"

#include "hourglass/device/device.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/device/gpu/device_info.h"
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

std::string gpu_arithmetic_identity() {
#ifdef HOURGLASS_HAS_GPU
  if (!gpu_available()) return "";
  const gpu::GpuDeviceInfo d = gpu::device_properties(0);
  return d.name + " " + d.arch + "; " + gpu::dnn_library_version() + "; " +
         gpu::blas_library_version();
#else
  return "";
#endif
}

void search_cudnn_channels_first_only() {
#ifdef HOURGLASS_HAS_GPU
  gpu::dnn::search_channels_first_only_for_testing();
#endif
}

}  // namespace hg::test
