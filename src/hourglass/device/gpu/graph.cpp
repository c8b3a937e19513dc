// Stream capture in thread-local mode: a call of this thread that would be unsafe during a
// capture (a wait for the device, a synchronous copy) fails and invalidates the capture, which
// ends it with an error instead of a graph; other threads (the loader's) are not constrained.
//
// After the capture, small memset nodes become kernel nodes that write the same bytes
// (graph_fill.h). cuDNN zeroes a 4-byte counter in its workspace before many of its
// convolution kernels; captured, each is a memset node, and on the H200 a memset node between
// two kernels kept the device idle about 1.5 us before it and 3 us after it, where kernels
// follow each other within 0.1-0.2 us: some 90 such nodes a ResNet-50 step, 0.4 ms of idle
// device. As kernel nodes in place they cost about 2 us each: ResNet-50 and CIFAR ResNet-18
// 0.5-0.7% faster (bench/README.md).
//
// Better still, most of them leave the chain: a cuDNN call's small workspace is the graph's own
// during a capture (keep_for_graph: new memory, kept for the graph's life), so the zeroing of
// its counter, the first work on it, can run at the graph's start, beside everything else; one
// kernel node does up to 64 of them.
#include "hourglass/device/gpu/graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <utility>
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

bool has(const std::vector<gpuGraphNode_t>& nodes, gpuGraphNode_t node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

// Adds the edge from -> to unless the graph has it.
void add_edge_once(gpuGraph_t graph, gpuGraphNode_t from, gpuGraphNode_t to) {
  if (!has(neighbours(to, true), from)) add_edge(graph, from, to);
}

// The nodes the next work captured on `s` will depend on; false when the capture cannot say.
bool capture_frontier(gpuStream_t s, std::vector<void*>& out) {
  gpuStreamCaptureStatus status;
  const gpuGraphNode_t* deps = nullptr;
  size_t n = 0;
#if defined(HOURGLASS_GPU_HIP)
  const gpuError_t err = hipStreamGetCaptureInfo_v2(s, &status, nullptr, nullptr, &deps, &n);
#elif CUDART_VERSION < 13000
  const gpuError_t err = cudaStreamGetCaptureInfo_v2(s, &status, nullptr, nullptr, &deps, &n);
#else
  const gpuError_t err = cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &n);
#endif
  if (err != gpuSuccess || status != gpuStreamCaptureStatusActive) {
    (void)gpuGetLastError();
    return false;
  }
  out.assign(deps, deps + n);
  return true;
}

struct MemsetNode {
  gpuGraphNode_t node;
  gpuMemsetParams p;
  uintptr_t begin, end;  // the bytes it writes, [begin, end)
  int own = -1;          // the OwnMemory range holding them, if any
};

// Rewrites each memset node of at most kMaxFillNodeBytes as a kernel node doing its writes.
// One into memory of the graph's own (`own`) that is the first work on it, and no other
// memset node's memory overlaps (an allocator's poison fill of the same block, in tests),
// moves to the graph's start: kernel nodes before every other root of the graph do all such
// memsets, and the memset's predecessors are joined to its dependents directly. Every other one is
// replaced in place, with the same dependencies and dependents. Returns {replaced, of them moved}.
std::pair<size_t, size_t> memsets_to_kernels(gpuGraph_t graph,
                                             const std::vector<CapturedGraph::OwnMemory>& own) {
  size_t n = 0;
  HG_GPU_CHECK(gpuGraphGetNodes(graph, nullptr, &n));
  std::vector<gpuGraphNode_t> nodes(n);
  if (n > 0) HG_GPU_CHECK(gpuGraphGetNodes(graph, nodes.data(), &n));
  std::vector<MemsetNode> memsets;
  for (gpuGraphNode_t node : nodes) {
    gpuGraphNodeType type;
    HG_GPU_CHECK(gpuGraphNodeGetType(node, &type));
    if (type != gpuGraphNodeTypeMemset) continue;
    MemsetNode m{node, {}, 0, 0};
    HG_GPU_CHECK(gpuGraphMemsetNodeGetParams(node, &m.p));
    m.begin = reinterpret_cast<uintptr_t>(m.p.dst);
    m.end = m.begin + (m.p.height > 0 ? (m.p.height - 1) * m.p.pitch : 0) +
            size_t(m.p.elementSize) * m.p.width;
    for (size_t r = 0; r < own.size() && m.own < 0; ++r)
      if (m.begin >= own[r].begin && m.end <= own[r].end) m.own = int(r);
    memsets.push_back(m);
  }
  auto small = [](const gpuMemsetParams& p) {
    return size_t(p.elementSize) * p.width * p.height <= kMaxFillNodeBytes &&
           (p.elementSize == 1 || p.elementSize == 2 || p.elementSize == 4);
  };
  auto overlaps_another = [&](const MemsetNode& m) {
    for (const MemsetNode& o : memsets)
      if (o.node != m.node && o.begin < m.end && m.begin < o.end) return true;
    return false;
  };
  // The moved ones: every predecessor is one the capture had when the memory was kept, or a
  // moved memset into the same memory. Repeated until nothing is added, so a chain of memsets
  // into fresh memory moves whole.
  std::vector<char> moves(memsets.size(), 0);
  auto moved_into = [&](gpuGraphNode_t node, int memory) {
    for (size_t i = 0; i < memsets.size(); ++i)
      if (memsets[i].node == node) return moves[i] && memsets[i].own == memory;
    return false;
  };
  for (bool added = true; added;) {
    added = false;
    for (size_t i = 0; i < memsets.size(); ++i) {
      const MemsetNode& m = memsets[i];
      if (moves[i] || m.own < 0 || !small(m.p) || overlaps_another(m)) continue;
      const std::vector<void*>& frontier = own[size_t(m.own)].frontier;
      bool first = true;
      for (gpuGraphNode_t pred : neighbours(m.node, true)) {
        const bool kept_before =
            std::find(frontier.begin(), frontier.end(), static_cast<void*>(pred)) != frontier.end();
        if (!kept_before && !moved_into(pred, m.own)) first = false;
      }
      if (!first) continue;
      moves[i] = 1;
      added = true;
    }
  }
  size_t replaced = 0;
  std::vector<FillTarget> targets;
  std::vector<gpuGraphNode_t> targets_of;
  for (size_t i = 0; i < memsets.size(); ++i) {
    const MemsetNode& m = memsets[i];
    if (!small(m.p)) continue;
    ++replaced;
    if (moves[i]) {
      targets.push_back(
          FillTarget{m.p.dst, m.p.value, m.p.elementSize, m.p.width, m.p.height, m.p.pitch});
      targets_of.push_back(m.node);
      continue;
    }
    const std::vector<gpuGraphNode_t> before = neighbours(m.node, true);
    const std::vector<gpuGraphNode_t> after = neighbours(m.node, false);
    gpuGraphNode_t fill = nullptr;
    HG_GPU_CHECK(add_fill_node(&fill, graph, before.data(), before.size(), m.p.dst, m.p.value,
                               m.p.elementSize, m.p.width, m.p.height, m.p.pitch));
    for (gpuGraphNode_t next : after) add_edge(graph, fill, next);
    graph_node_stands_for(fill, m.node);
    HG_GPU_CHECK(gpuGraphDestroyNode(m.node));
  }
  // The neighbours of a moved memset are asked for when it is removed: earlier removals
  // rewired them. The fill nodes come before every root of the graph, hence before everything
  // else, rather than before each moved memset's dependents: on the H200 a kernel with a second
  // predecessor outside its chain cost the replay as much as the memset's kernel node in place.
  std::vector<gpuGraphNode_t> fills;
  for (size_t first = 0; first < targets.size(); first += kMaxFillTargets) {
    const size_t count = std::min(targets.size() - first, size_t(kMaxFillTargets));
    gpuGraphNode_t node = nullptr;
    HG_GPU_CHECK(add_fills_node(&node, graph, targets.data() + first, int(count)));
    graph_node_stands_for(node, targets_of[first]);
    fills.push_back(node);
  }
  for (gpuGraphNode_t moved_node : targets_of) {
    const std::vector<gpuGraphNode_t> before = neighbours(moved_node, true);
    const std::vector<gpuGraphNode_t> after = neighbours(moved_node, false);
    for (gpuGraphNode_t next : after)
      for (gpuGraphNode_t prev : before) add_edge_once(graph, prev, next);
    HG_GPU_CHECK(gpuGraphDestroyNode(moved_node));
  }
  if (!fills.empty()) {
    size_t roots = 0;
    HG_GPU_CHECK(gpuGraphGetRootNodes(graph, nullptr, &roots));
    std::vector<gpuGraphNode_t> root_nodes(roots);
    if (roots > 0) HG_GPU_CHECK(gpuGraphGetRootNodes(graph, root_nodes.data(), &roots));
    root_nodes.resize(roots);
    for (gpuGraphNode_t root : root_nodes)
      if (!has(fills, root))
        for (gpuGraphNode_t fill : fills) add_edge(graph, fill, root);
  }
  return {replaced, targets.size()};
}

// The graph recording on this thread, if any (keep_for_graph).
thread_local CapturedGraph* t_recording = nullptr;

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
    t_recording = this;
    issue();
    t_recording = nullptr;
  } catch (...) {
    t_recording = nullptr;
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
  try {
    std::tie(memsets_replaced_, memsets_moved_) = memsets_to_kernels(graph, own_);
  } catch (...) {
    (void)gpuGraphDestroy(graph);
    throw;
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

bool recording_graph() { return t_recording != nullptr; }

bool keep_for_graph(const void* data, size_t bytes, std::shared_ptr<const void> holder) {
  CapturedGraph* g = t_recording;
  if (g == nullptr) return false;
  g->kept_.push_back(std::move(holder));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  CapturedGraph::OwnMemory own{begin, begin + bytes, {}};
  if (capture_frontier(stream(g->index_), own.frontier)) g->own_.push_back(std::move(own));
  return true;
}

void CapturedGraph::launch() {
  set_device(index_);
  HG_GPU_CHECK(gpuGraphLaunch(static_cast<gpuGraphExec_t>(exec_), stream(index_)));
}

}  // namespace hg::gpu
