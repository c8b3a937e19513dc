// Device work recorded once and replayed: the build-neutral face of gpu/graph.h (CUDA and HIP
// graphs), for the layers above, which never see the runtime. A CPU, or a build without a GPU
// backend, has nothing to capture: supported() says so and the constructor refuses.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "hourglass/device/device.h"
#include "hourglass/device/memory_plan.h"

namespace hg {

class CapturedWork {
 public:
  // Whether work on `device` can be captured: a GPU in a GPU build.
  static bool supported(Device device);

  // Records the work `issue` sends to `device`'s stream from this thread, without running it,
  // into a graph whose allocations come from a memory pool of its own (kept for the graph's
  // life: gpu_allocator.h, GraphPool). Tensors allocated during `issue` and kept afterwards
  // live in that pool, and each replay rewrites them. `trace`, a MemoryTrace of the same work
  // run eagerly, lays the pool's blocks out in one (GraphPool::plan); empty, blocks are reused
  // only for requests of their size. Throws what `issue` threw, or a Runtime Error naming the
  // call that broke the capture; nothing has run then.
  CapturedWork(Device device, const std::function<void()>& issue,
               const std::vector<TracedRequest>& trace = {});
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
  // With a trace: the planned block's bytes, the most the traced requests held at once, and
  // the capture's requests placed in the block and served outside it.
  struct PlannedMemory {
    size_t bytes = 0, most_held = 0;
    int64_t placed = 0, elsewhere = 0;
  };
  PlannedMemory planned_memory() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Records the device memory requests this thread makes to `device` while it lives, in order,
// with when each was freed (gpu_allocator.h, AllocationTrace): for a CapturedWork of the same
// work. Records nothing for a CPU or in a build without a GPU backend. One at a time per device.
class MemoryTrace {
 public:
  explicit MemoryTrace(Device device);
  ~MemoryTrace();
  MemoryTrace(const MemoryTrace&) = delete;
  MemoryTrace& operator=(const MemoryTrace&) = delete;
  // Ends the recording; the requests in the order they were made.
  std::vector<TracedRequest> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hg
