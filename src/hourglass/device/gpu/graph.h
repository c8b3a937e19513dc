// A device stream's work recorded once as a graph (CUDA graphs; HIP graphs through the same
// names, runtime.h) and launched again as one unit: replaying a captured training step costs
// one launch instead of hundreds, and the GPU runs its kernels back to back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hourglass/device/gpu/gpu_allocator.h"

namespace hg::gpu {

class CapturedGraph {
 public:
  // Records, without running it, the work that `issue` sends to device `index`'s stream from
  // the calling thread, with every allocation of the thread's during `issue` served by `pool`
  // (which must outlive the graph). Other threads may go on using the device meanwhile, on
  // other streams. Throws what `issue` threw, or a Runtime Error naming the call that broke the
  // capture (a wait for the device, a call on the legacy stream); the stream is then back to
  // normal and nothing was run.
  CapturedGraph(int index, GraphPool& pool, const std::function<void()>& issue);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Runs the recorded work once more on the device's stream, asynchronously.
  void launch();
  // Nodes of the graph (kernels, copies, fills, library calls' nodes).
  size_t nodes() const { return nodes_; }
  // Small memset nodes of the capture done by kernel nodes instead, and of those, the ones
  // moved to the graph's start (their memory is the graph's own: keep_for_graph).
  size_t memsets_replaced() const { return memsets_replaced_; }
  size_t memsets_moved() const { return memsets_moved_; }

  // Memory the graph keeps for its life (keep_for_graph): its range [begin, end), and the
  // nodes the next work captured on the stream depended on when it was kept.
  struct OwnMemory {
    uintptr_t begin, end;
    std::vector<void*> frontier;  // gpuGraphNode_t
  };

 private:
  friend bool keep_for_graph(const void* data, size_t bytes, std::shared_ptr<const void> holder);
  int index_;
  void* exec_ = nullptr;  // gpuGraphExec_t
  size_t nodes_ = 0;
  size_t memsets_replaced_ = 0, memsets_moved_ = 0;
  std::vector<std::shared_ptr<const void>> kept_;
  std::vector<OwnMemory> own_;
};

// Whether a CapturedGraph is recording on the calling thread.
bool recording_graph();

// While a CapturedGraph records on the calling thread: keeps `holder`, which owns the memory
// [data, data + bytes), alive until the graph is destroyed, so that nothing but the graph's own
// work after this call touches that memory. The memory must be new to the capture (allocated
// under FreshPoolBlocks, gpu_allocator.h): no work recorded before touched it. Then a small
// memset into it that is the first work recorded on it (nothing captured after this call comes
// before it) needs no predecessor, and moves to the graph's start, where one kernel node ahead
// of everything else does up to 64 of them. Returns false, keeping nothing, when no
// capture records on this thread. For a library call's small workspace (dnn_cudnn.cpp), which
// many cuDNN engines zero a counter of before their kernel.
bool keep_for_graph(const void* data, size_t bytes, std::shared_ptr<const void> holder);

}  // namespace hg::gpu
