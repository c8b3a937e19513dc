// A device stream's work recorded once as a graph (CUDA graphs; HIP graphs through the same
// names, runtime.h) and launched again as one unit: replaying a captured training step costs
// one launch instead of hundreds, and the GPU runs its kernels back to back.
#pragma once

#include <cstddef>
#include <functional>

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

 private:
  int index_;
  void* exec_ = nullptr;  // gpuGraphExec_t
  size_t nodes_ = 0;
};

}  // namespace hg::gpu
