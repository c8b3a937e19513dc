#include "hourglass/device/stream_clock.h"

#include <algorithm>

#include "hourglass/base/error.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/runtime.h"
#endif

namespace hg {

StreamClock::StreamClock(Device device) : device_(device) {
#ifndef HOURGLASS_HAS_GPU
  if (device.is_gpu()) throw_invalid(gpu_unavailable_reason());
#endif
}

StreamClock::~StreamClock() {
#ifdef HOURGLASS_HAS_GPU
  for (void* e : events_) (void)gpuEventDestroy(static_cast<gpuEvent_t>(e));
  for (void* e : spare_) (void)gpuEventDestroy(static_cast<gpuEvent_t>(e));
#endif
}

int StreamClock::mark() {
  if (device_.is_cpu()) {
    host_.push_back(std::chrono::steady_clock::now());
    return int(host_.size()) - 1;
  }
#ifdef HOURGLASS_HAS_GPU
  gpu::set_device(device_.index);
  if (spare_.empty()) reserve(1);
  auto e = static_cast<gpuEvent_t>(spare_.back());
  spare_.pop_back();
  events_.push_back(e);
  HG_GPU_CHECK(gpuEventRecord(e, gpu::stream(device_.index)));
  return int(events_.size()) - 1;
#else
  return 0;
#endif
}

void StreamClock::reserve(int marks) {
  if (device_.is_cpu()) {
    host_.reserve(host_.size() + size_t(std::max(marks, 0)));
    return;
  }
#ifdef HOURGLASS_HAS_GPU
  gpu::set_device(device_.index);
  for (int i = 0; i < marks; ++i) {
    gpuEvent_t e = nullptr;
    HG_GPU_CHECK(gpuEventCreate(&e));
    spare_.push_back(e);
  }
  events_.reserve(events_.size() + spare_.size());
#endif
}

double StreamClock::elapsed_ms(int a, int b) {
  if (device_.is_cpu()) {
    HG_ASSERT(a >= 0 && b >= 0 && size_t(a) < host_.size() && size_t(b) < host_.size(),
              "stream clock: marks {} and {} of {}", a, b, host_.size());
    return std::chrono::duration<double, std::milli>(host_[size_t(b)] - host_[size_t(a)]).count();
  }
#ifdef HOURGLASS_HAS_GPU
  HG_ASSERT(a >= 0 && b >= 0 && size_t(a) < events_.size() && size_t(b) < events_.size(),
            "stream clock: marks {} and {} of {}", a, b, events_.size());
  auto ea = static_cast<gpuEvent_t>(events_[size_t(a)]);
  auto eb = static_cast<gpuEvent_t>(events_[size_t(b)]);
  HG_GPU_CHECK(gpuEventSynchronize(eb));
  float ms = 0;
  HG_GPU_CHECK(gpuEventElapsedTime(&ms, ea, eb));
  return double(ms);
#else
  return 0;
#endif
}

}  // namespace hg
