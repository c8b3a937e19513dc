// Stream capture in thread-local mode: a call of this thread that would be unsafe during a
// capture (a wait for the device, a synchronous copy) fails and invalidates the capture, which
// ends it with an error instead of a graph; other threads (the loader's) are not constrained.
#include "hourglass/device/gpu/graph.h"

#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

namespace {

// Ends the capture on `s` after `issue` failed, dropping whatever was recorded.
void abandon_capture(gpuStream_t s) {
  gpuGraph_t partial = nullptr;
  if (gpuStreamEndCapture(s, &partial) == gpuSuccess && partial != nullptr)
    (void)gpuGraphDestroy(partial);
  (void)gpuGetLastError();
}

}  // namespace

CapturedGraph::CapturedGraph(int index, GraphPool& pool, const std::function<void()>& issue)
    : index_(index) {
  HG_ASSERT(pool.device() == index, "graph on gpu:{} with memory of gpu:{}", index, pool.device());
  set_device(index);
  const gpuStream_t s = stream(index);
  HG_GPU_CHECK(gpuStreamBeginCapture(s, gpuStreamCaptureModeThreadLocal));
  try {
    GraphPoolRoute route(pool);
    issue();
  } catch (...) {
    abandon_capture(s);
    throw;
  }
  gpuGraph_t graph = nullptr;
  const gpuError_t ended = gpuStreamEndCapture(s, &graph);
  if (ended != gpuSuccess) {
    if (graph != nullptr) (void)gpuGraphDestroy(graph);
    throw_gpu_error(ended,
                    "gpuStreamEndCapture (a call during the capture waited for the "
                    "device or used the legacy stream)",
                    __FILE__, __LINE__);
  }
  gpuGraphExec_t exec = nullptr;
  const gpuError_t made = gpuGraphInstantiateWithFlags(&exec, graph, 0);
  if (made == gpuSuccess) (void)gpuGraphGetNodes(graph, nullptr, &nodes_);
  (void)gpuGraphDestroy(graph);  // the executable graph is a copy
  HG_GPU_CHECK(made);
  exec_ = exec;
}

CapturedGraph::~CapturedGraph() {
  if (exec_ == nullptr) return;
  const gpuError_t err = gpuGraphExecDestroy(static_cast<gpuGraphExec_t>(exec_));
  if (err != gpuSuccess) {
    (void)gpuGetLastError();
    HG_LOG_WARN("gpu:{}: destroying a captured graph failed: {}", index_, gpuGetErrorString(err));
  }
}

void CapturedGraph::launch() {
  set_device(index_);
  HG_GPU_CHECK(gpuGraphLaunch(static_cast<gpuGraphExec_t>(exec_), stream(index_)));
}

}  // namespace hg::gpu
