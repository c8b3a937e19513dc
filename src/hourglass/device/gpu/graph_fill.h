// Kernel nodes that do memset nodes' writes (graph.cpp turns a captured graph's small memset
// nodes into such nodes; graph_fill.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// Adds to `graph`, after `deps`, a kernel node that writes the low `element_size` (1, 2 or 4)
// bytes of `value` to `width` elements in each of `height` rows `pitch` bytes apart from `dst`:
// what a memset node with those parameters writes.
gpuError_t add_fill_node(gpuGraphNode_t* node, gpuGraph_t graph, const gpuGraphNode_t* deps,
                         size_t ndeps, void* dst, uint32_t value, uint32_t element_size,
                         size_t width, size_t height, size_t pitch);

// One memset node's writes, for add_fills_node.
struct FillTarget {
  void* dst;
  uint32_t value, element_size;
  uint64_t width, height, pitch;
};
// Targets of one add_fills_node (its parameters stay within a kernel's 4 KiB).
inline constexpr int kMaxFillTargets = 64;

// Adds to `graph`, with no dependency, one kernel node that does the writes of `count` (1 to
// kMaxFillTargets) targets.
gpuError_t add_fills_node(gpuGraphNode_t* node, gpuGraph_t graph, const FillTarget* targets,
                          int count);

}  // namespace hg::gpu
