#include "hourglass/device/captured_work.h"

#include "hourglass/base/error.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#include "hourglass/device/gpu/graph.h"
#endif

namespace hg {

#ifdef HOURGLASS_HAS_GPU
namespace {
gpu::GraphPool& planned(gpu::GraphPool& pool, const std::vector<TracedRequest>& trace) {
  if (!trace.empty()) pool.plan(trace);
  return pool;
}
}  // namespace

struct CapturedWork::Impl {
  Impl(int index, const std::function<void()>& issue, const std::vector<TracedRequest>& trace)
      : pool(index), graph(index, planned(pool, trace), issue) {}
  gpu::GraphPool pool;  // declared first: outlives the graph
  gpu::CapturedGraph graph;
};

struct MemoryTrace::Impl {
  explicit Impl(int index) : trace(index) {}
  gpu::AllocationTrace trace;
};
#else
struct CapturedWork::Impl {};
struct MemoryTrace::Impl {};
#endif

MemoryTrace::MemoryTrace(Device device) {
#ifdef HOURGLASS_HAS_GPU
  if (device.is_gpu()) impl_ = std::make_unique<Impl>(device.index);
#else
  (void)device;
#endif
}

MemoryTrace::~MemoryTrace() = default;

std::vector<TracedRequest> MemoryTrace::finish() {
#ifdef HOURGLASS_HAS_GPU
  if (impl_) return impl_->trace.finish();
#endif
  return {};
}

bool CapturedWork::supported(Device device) {
#ifdef HOURGLASS_HAS_GPU
  return device.is_gpu();
#else
  (void)device;
  return false;
#endif
}

CapturedWork::CapturedWork(Device device, const std::function<void()>& issue,
                           const std::vector<TracedRequest>& trace) {
  HG_CHECK(supported(device), "capturing device work: {} has no graphs to capture into{}",
           device.str(), device.is_gpu() ? " (this build has no GPU backend)" : "");
#ifdef HOURGLASS_HAS_GPU
  impl_ = std::make_unique<Impl>(device.index, issue, trace);
#else
  (void)issue;
  (void)trace;
#endif
}

CapturedWork::~CapturedWork() = default;

void CapturedWork::replay() {
#ifdef HOURGLASS_HAS_GPU
  impl_->graph.launch();
#endif
}

size_t CapturedWork::nodes() const {
#ifdef HOURGLASS_HAS_GPU
  return impl_->graph.nodes();
#else
  return 0;
#endif
}

size_t CapturedWork::memsets_replaced() const {
#ifdef HOURGLASS_HAS_GPU
  return impl_->graph.memsets_replaced();
#else
  return 0;
#endif
}

size_t CapturedWork::memsets_moved() const {
#ifdef HOURGLASS_HAS_GPU
  return impl_->graph.memsets_moved();
#else
  return 0;
#endif
}

size_t CapturedWork::memory_bytes() const {
#ifdef HOURGLASS_HAS_GPU
  return impl_->pool.bytes();
#else
  return 0;
#endif
}

CapturedWork::PlannedMemory CapturedWork::planned_memory() const {
#ifdef HOURGLASS_HAS_GPU
  const gpu::GraphPool::PlanUse use = impl_->pool.plan_use();
  return {use.planned_bytes, use.most_held, use.placed, use.elsewhere};
#else
  return {};
#endif
}

}  // namespace hg
