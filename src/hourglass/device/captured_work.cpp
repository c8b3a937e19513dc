#include "hourglass/device/captured_work.h"

#include "hourglass/base/error.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/graph.h"
#endif

namespace hg {

#ifdef HOURGLASS_HAS_GPU
struct CapturedWork::Impl {
  Impl(int index, const std::function<void()>& issue) : pool(index), graph(index, pool, issue) {}
  gpu::GraphPool pool;  // declared first: outlives the graph
  gpu::CapturedGraph graph;
};
#else
struct CapturedWork::Impl {};
#endif

bool CapturedWork::supported(Device device) {
#ifdef HOURGLASS_HAS_GPU
  return device.is_gpu();
#else
  (void)device;
  return false;
#endif
}

CapturedWork::CapturedWork(Device device, const std::function<void()>& issue) {
  HG_CHECK(supported(device), "capturing device work: {} has no graphs to capture into{}",
           device.str(), device.is_gpu() ? " (this build has no GPU backend)" : "");
#ifdef HOURGLASS_HAS_GPU
  impl_ = std::make_unique<Impl>(device.index, issue);
#else
  (void)issue;
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

}  // namespace hg
