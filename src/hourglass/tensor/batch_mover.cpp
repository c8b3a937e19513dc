#include "hourglass/tensor/batch_mover.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/tensor/gpu/batch_upload.h"
#endif

namespace hg {

#ifdef HOURGLASS_HAS_GPU
struct BatchMover::Impl {
  explicit Impl(int device) : uploader(device, kSlots) {}
  gpu::BatchUploader uploader;
};
#else
struct BatchMover::Impl {};
#endif

BatchMover::BatchMover(Device device) : device_(device) {
#ifdef HOURGLASS_HAS_GPU
  if (device.is_gpu()) impl_ = std::make_unique<Impl>(device.index);
#endif
}

BatchMover::~BatchMover() = default;

Tensor BatchMover::host_empty(const Shape& shape, DType dtype) {
#ifdef HOURGLASS_HAS_GPU
  if (impl_) return impl_->uploader.pinned_empty(shape, dtype);
#endif
  return Tensor::empty(shape, dtype);
}

Tensor BatchMover::move(const Tensor& t) {
  if (t.device() == device_) return t;
#ifdef HOURGLASS_HAS_GPU
  if (impl_ && t.device().is_cpu()) return impl_->uploader.upload(t.contiguous());
#endif
  return t.to(device_);
}

}  // namespace hg
