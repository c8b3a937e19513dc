// Timestamps taken in the order of a device's work: on a GPU, events recorded on the device's
// stream (gpu::stream), so a mark's time is when the device got there; on the CPU, whose ops run
// on the calling thread, the host clock. For the op profiler (ops/op_profile.h).
#pragma once

#include <chrono>
#include <vector>

#include "hourglass/device/device.h"

namespace hg {

class StreamClock {
 public:
  explicit StreamClock(Device device);
  ~StreamClock();
  StreamClock(const StreamClock&) = delete;
  StreamClock& operator=(const StreamClock&) = delete;

  // Marks the point the device's work has reached as issued so far; returns the mark's number.
  int mark();
  // Prepares `marks` more marks ahead (GPU events are created here rather than in mark(), which
  // then only records one: what a profiler calls between ops should cost little).
  void reserve(int marks);
  // Milliseconds from mark `a` to mark `b` (on a GPU this waits for the device to reach b).
  double elapsed_ms(int a, int b);
  int marks() const { return int(host_.size() + events_.size()); }
  Device device() const { return device_; }

 private:
  Device device_;
  std::vector<std::chrono::steady_clock::time_point> host_;  // CPU marks
  std::vector<void*> events_;                                // GPU marks (gpuEvent_t)
  std::vector<void*> spare_;                                 // created, not yet recorded
};

}  // namespace hg
