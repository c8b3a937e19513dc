// The GPU's caching, stream-ordered allocator (see gpu_allocator.cpp for the policy).
#pragma once

#include <cstdint>
#include <vector>

#include "hourglass/device/allocator.h"
#include "hourglass/device/memory_plan.h"

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
  // Bytes of device memory the pool holds (its blocks in use and free, its planned block).
  size_t bytes() const;

  // Lays out `requests` (an eager run of the work about to be captured, AllocationTrace) in one
  // block of the pool's (memory_plan.h), taken now, before the capture. Routed requests then
  // follow the trace: one of the size of the next traced request that was freed within the
  // trace (or of one a few requests further on: the capture may skip some, such as a first
  // step's optimizer state) gets that request's place in the block, unless it would overlap a
  // block of the plan still held (a request held longer than traced) or comes under
  // FreshPoolBlocks; every other request is served as without a plan. Once per pool, before
  // its first request.
  void plan(const std::vector<TracedRequest>& requests);
  struct PlanUse {
    size_t planned_bytes = 0;  // the block
    size_t most_held = 0;      // the plan's lower bound
    int64_t placed = 0;        // requests given a place in it
    int64_t elsewhere = 0;     // routed requests served outside it
  };
  PlanUse plan_use() const;

 private:
  friend class GraphPoolRoute;
  int device_;
  uint64_t id_;
};

// While one lives, the calling thread's requests to `device` are recorded in order, each with
// when it was freed (by any thread): the sizes and lifetimes a GraphPool's plan lays out. One
// at a time per device; the cost is a vector append under the allocator's lock.
class AllocationTrace {
 public:
  explicit AllocationTrace(int device);
  ~AllocationTrace();
  AllocationTrace(const AllocationTrace&) = delete;
  AllocationTrace& operator=(const AllocationTrace&) = delete;
  // Ends the recording and returns the requests in the order they were made.
  std::vector<TracedRequest> finish();

 private:
  int device_;
  bool open_ = true;
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
