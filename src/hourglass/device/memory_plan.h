// Offsets for a known sequence of memory requests: the layout of a captured graph's
// intermediate buffers in one block (gpu_allocator.h, GraphPool::plan).
//
// A graph replays the same requests in the same order every time, so where each lives can be
// decided once, from their sizes and lifetimes as an eager run of the same work showed them
// (AllocationTrace), instead of by a caching allocator that reuses a freed block only for a
// request of exactly its size. Requests whose lifetimes do not overlap may share bytes; the block
// then needs about the most bytes ever held at once, where one cache of blocks per size needs
// the sum over sizes of each size's own peak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace hg {

// A request of a traced stretch of work: its size in bytes and the events at which it was made
// and freed (each request and each free of a traced block is one event, counted from 0).
// `freed` is kNeverFreed when the block was still held as the trace ended.
struct TracedRequest {
  static constexpr int64_t kNeverFreed = std::numeric_limits<int64_t>::max();
  size_t size = 0;
  int64_t made = 0;
  int64_t freed = kNeverFreed;
  const char* tag = "";  // what it was made for (allocation_tag.h): an op's name, or ""
  bool live_together(const TracedRequest& o) const { return made < o.freed && o.made < freed; }
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, in the requests' order
  size_t bytes = 0;             // the block they fit in
  size_t most_held = 0;         // the most bytes the requests hold at once (a lower bound)
};

// Places every request at an offset, multiples of `alignment` (the requests' sizes are, too),
// so that no two requests live at the same time share a byte: each into the smallest gap
// between the requests it lives beside that fits, else above them all, in three orders
// (largest first, longest-lived first, as made), keeping the smallest block.
MemoryPlan plan_memory(const std::vector<TracedRequest>& requests, size_t alignment);

// The most bytes `requests` hold at once, the event at which they first do, and the requests
// held then (indices into `requests`, in order): where a step's memory peaks, and what for.
struct MemoryPeak {
  size_t bytes = 0;
  int64_t event = -1;
  std::vector<size_t> live;
};
MemoryPeak peak_of(const std::vector<TracedRequest>& requests);

}  // namespace hg
