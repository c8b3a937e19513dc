#include "hourglass/device/device.h"

#include <charconv>

#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "gpu" || text == "cuda" || text == "hip") return gpu(0);
  for (const char* prefix : {"gpu:", "cuda:", "hip:"}) {
    const std::string p = prefix;
    if (text.rfind(p, 0) == 0) {
      int index = -1;
      const char* first = text.data() + p.size();
      const char* last = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(first, last, index);
      if (ec == std::errc() && ptr == last && index >= 0) return gpu(index);
    }
  }
  throw_invalid(fmt::format("unknown device '{}'", untrusted_excerpt(text)),
                "use \"cpu\", \"gpu\" or \"gpu:N\"");
}

std::string Device::str() const { return is_cpu() ? "cpu" : fmt::format("gpu:{}", index); }

}  // namespace hg

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/runtime.h"

namespace hg {
int gpu_device_count() { return gpu::device_count(); }
std::string gpu_unavailable_reason() { return gpu::no_device_reason(); }
}  // namespace hg
#else
namespace hg {
int gpu_device_count() { return 0; }
std::string gpu_unavailable_reason() {
  return "this hourglass was built without a GPU backend (rebuild with -DHOURGLASS_GPU=cuda or "
         "hip on a machine with the CUDA toolkit and cuDNN, or ROCm)";
}
}  // namespace hg
#endif
