// Device work recorded once and replayed: the build-neutral face of gpu/graph.h (CUDA and HIP
// graphs), for the layers above, which never see the runtime. A CPU, or a build without a GPU
// backend, has nothing to capture: supported() says so and the constructor refuses.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "hourglass/device/device.h"

namespace hg {

class CapturedWork {
 public:
  // Whether work on `device` can be captured: a GPU in a GPU build.
  static bool supported(Device device);

  // Records the work `issue` sends to `device`'s stream from this thread, without running it,
  // into a graph whose allocations come from a memory pool of its own (kept for the graph's
  // life: gpu_allocator.h, GraphPool). Tensors allocated during `issue` and kept afterwards
  // live in that pool, and each replay rewrites them. Throws what `issue` threw, or a Runtime
  // Error naming the call that broke the capture; nothing has run then.
  CapturedWork(Device device, const std::function<void()>& issue);
  ~CapturedWork();
  CapturedWork(const CapturedWork&) = delete;
  CapturedWork& operator=(const CapturedWork&) = delete;

  // Issues the recorded work again, asynchronously, in the device's stream order.
  void replay();
  // The graph's nodes, and the bytes of device memory its pool holds.
  size_t nodes() const;
  size_t memory_bytes() const;
  // The capture's small memsets done by kernel nodes, and of those, the ones moved to the
  // graph's start (gpu/graph.h).
  size_t memsets_replaced() const;
  size_t memsets_moved() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hg
