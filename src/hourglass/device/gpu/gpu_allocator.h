// The GPU's caching, stream-ordered allocator (see gpu_allocator.cpp for the policy).
#pragma once

#include <cstdint>

#include "hourglass/device/allocator.h"

namespace hg::gpu {

// The allocator of GPU `index` (created on first use; lives for the process). Throws
// InvalidInput when the machine has no such GPU.
Allocator& allocator(int index);

// Tests: when on, every block handed out is first filled with 0xFF bytes (NaN in every float
// dtype), so an op that leaves an output element unwritten produces a NaN the test catches.
void set_poison(bool on);
bool poison();

// Memory of one captured graph (graph.h). While a GraphPool is routed to on a thread
// (GraphPoolRoute), that thread's requests to the pool's device are served from the pool's own
// blocks, and every block the pool handed out returns to the pool when it is freed, from any
// thread, at any time. The pool's free blocks are never handed to a request outside it while
// it lives: a graph captured with its memory keeps the addresses of its intermediate buffers
// for every replay, whatever is allocated between the replays. The pool's blocks, free or not,
// count as in use (they are committed to the graph); destroying the pool moves its free blocks
// to the common cache, and blocks still held go there when they are freed.
class GraphPool {
 public:
  explicit GraphPool(int device);
  ~GraphPool();
  GraphPool(const GraphPool&) = delete;
  GraphPool& operator=(const GraphPool&) = delete;

  int device() const { return device_; }
  // Bytes of device memory the pool holds (its blocks in use and free).
  size_t bytes() const;

 private:
  friend class GraphPoolRoute;
  int device_;
  uint64_t id_;
};

// Routes the calling thread's requests to the pool's device into the pool while it lives.
// Routes do not nest.
class GraphPoolRoute {
 public:
  explicit GraphPoolRoute(GraphPool& pool);
  ~GraphPoolRoute();
  GraphPoolRoute(const GraphPoolRoute&) = delete;
  GraphPoolRoute& operator=(const GraphPoolRoute&) = delete;
};

// While one lives on a thread, that thread's requests routed to a graph pool take no block the
// pool handed out before (a block earlier work of the capture may have touched): a common-cache
// block or new memory. For memory a graph keeps as its own (graph.h, keep_for_graph).
class FreshPoolBlocks {
 public:
  FreshPoolBlocks();
  ~FreshPoolBlocks();
  FreshPoolBlocks(const FreshPoolBlocks&) = delete;
  FreshPoolBlocks& operator=(const FreshPoolBlocks&) = delete;

 private:
  bool was_;
};

// Block sizes are rounded up to multiples of this many bytes; a freed block is reused for a
// request of the same rounded size.
inline constexpr size_t kBlockQuantum = 512;

}  // namespace hg::gpu
