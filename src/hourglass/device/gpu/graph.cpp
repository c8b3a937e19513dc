// Stream capture in thread-local mode: a call of this thread that would be unsafe during a
// capture (a wait for the device, a synchronous copy) fails and invalidates the capture, which
// ends it with an error instead of a graph; other threads (the loader's) are not constrained.
//
// After the capture, small memset nodes become kernel nodes that write the same bytes
// (graph_fill.h). cuDNN zeroes a 4-byte counter in its workspace before many of its
// convolution kernels; captured, each is a memset node, and on the H200 a memset node between
// two kernels kept the device idle about 1.5 us before it and 3 us after it, where kernels
// follow each other within 0.1-0.2 us: some 90 such nodes a ResNet-50 step, 0.4 ms of idle
// device. As kernel nodes they cost about 2 us each: ResNet-50 and CIFAR ResNet-18 0.5-0.7%
// faster (bench/README.md). HOURGLASS_GRAPH_MEMSET_KERNELS=0 keeps the memset nodes.
#include "hourglass/device/gpu/graph.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/graph_fill.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/device/kernel_activity.h"

namespace hg::gpu {

namespace {

// Memsets up to this many bytes become kernel nodes; larger ones run at the copy engines' or
// the memory's rate, where the node's fixed cost matters less.
constexpr size_t kMaxFillNodeBytes = size_t(64) << 10;

bool memset_kernels_on() {
  static const bool on = [] {
    const char* v = std::getenv("HOURGLASS_GRAPH_MEMSET_KERNELS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// The nodes before and after `node`, as the runtime of this build spells the calls.
std::vector<gpuGraphNode_t> neighbours(gpuGraphNode_t node, bool before) {
  size_t n = 0;
#if defined(HOURGLASS_GPU_HIP) || CUDART_VERSION < 13000
  auto get = [&](gpuGraphNode_t* out) {
    return before ? gpuGraphNodeGetDependencies(node, out, &n)
                  : gpuGraphNodeGetDependentNodes(node, out, &n);
  };
#else
  auto get = [&](gpuGraphNode_t* out) {
    return before ? cudaGraphNodeGetDependencies(node, out, nullptr, &n)
                  : cudaGraphNodeGetDependentNodes(node, out, nullptr, &n);
  };
#endif
  HG_GPU_CHECK(get(nullptr));
  std::vector<gpuGraphNode_t> nodes(n);
  if (n > 0) HG_GPU_CHECK(get(nodes.data()));
  nodes.resize(n);
  return nodes;
}

void add_edge(gpuGraph_t graph, gpuGraphNode_t from, gpuGraphNode_t to) {
#if defined(HOURGLASS_GPU_HIP) || CUDART_VERSION < 13000
  HG_GPU_CHECK(gpuGraphAddDependencies(graph, &from, &to, 1));
#else
  HG_GPU_CHECK(cudaGraphAddDependencies(graph, &from, &to, nullptr, 1));
#endif
}

// Replaces each memset node of at most kMaxFillNodeBytes by a kernel node with the same
// dependencies and dependents; returns how many.
size_t memsets_to_kernels(gpuGraph_t graph) {
  size_t n = 0;
  HG_GPU_CHECK(gpuGraphGetNodes(graph, nullptr, &n));
  std::vector<gpuGraphNode_t> nodes(n);
  if (n > 0) HG_GPU_CHECK(gpuGraphGetNodes(graph, nodes.data(), &n));
  size_t replaced = 0;
  for (size_t i = 0; i < n; ++i) {
    gpuGraphNodeType type;
    HG_GPU_CHECK(gpuGraphNodeGetType(nodes[i], &type));
    if (type != gpuGraphNodeTypeMemset) continue;
    gpuMemsetParams p = {};
    HG_GPU_CHECK(gpuGraphMemsetNodeGetParams(nodes[i], &p));
    const size_t bytes = size_t(p.elementSize) * p.width * p.height;
    if (bytes > kMaxFillNodeBytes ||
        (p.elementSize != 1 && p.elementSize != 2 && p.elementSize != 4))
      continue;
    const std::vector<gpuGraphNode_t> before = neighbours(nodes[i], true);
    const std::vector<gpuGraphNode_t> after = neighbours(nodes[i], false);
    gpuGraphNode_t fill = nullptr;
    HG_GPU_CHECK(add_fill_node(&fill, graph, before.data(), before.size(), p.dst, p.value,
                               p.elementSize, p.width, p.height, p.pitch));
    for (gpuGraphNode_t next : after) add_edge(graph, fill, next);
    graph_node_stands_for(fill, nodes[i]);
    HG_GPU_CHECK(gpuGraphDestroyNode(nodes[i]));
    ++replaced;
  }
  return replaced;
}

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
  if (memset_kernels_on()) {
    try {
      memsets_to_kernels(graph);
    } catch (...) {
      (void)gpuGraphDestroy(graph);
      throw;
    }
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
