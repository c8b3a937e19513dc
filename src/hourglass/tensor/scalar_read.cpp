#include "hourglass/tensor/scalar_read.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/tensor/gpu/pinned.h"
#else
namespace hg::gpu {
class AsyncScalar {};  // never made in a build without GPUs
}  // namespace hg::gpu
#endif

namespace hg {

ScalarRead::ScalarRead() = default;
ScalarRead::~ScalarRead() = default;

void ScalarRead::start(const Tensor& scalar) {
  HG_CHECK(scalar.numel() == 1, "ScalarRead::start: needs a one-element tensor, got {}",
           scalar.describe());
#ifdef HOURGLASS_HAS_GPU
  if (scalar.device().is_gpu()) {
    if (!gpu_) gpu_ = std::make_unique<gpu::AsyncScalar>();
    gpu_->start(scalar);
    started_ = true;
    return;
  }
#endif
  gpu_.reset();  // an earlier GPU read: waited for before its buffer goes
  host_value_ = scalar.item();
  started_ = true;
}

bool ScalarRead::ready() const {
  if (!started_) return false;
#ifdef HOURGLASS_HAS_GPU
  if (gpu_) return gpu_->ready();
#endif
  return true;
}

double ScalarRead::value() const {
  HG_CHECK(started_, "ScalarRead::value: no read was started");
#ifdef HOURGLASS_HAS_GPU
  if (gpu_) return gpu_->value();
#endif
  return host_value_;
}

}  // namespace hg
