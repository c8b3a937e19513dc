#include "hourglass/tensor/gpu/batch_upload.h"

#include <cstring>
#include <utility>

#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

namespace {

gpuEvent_t new_event() {
  gpuEvent_t e = nullptr;
  HG_GPU_CHECK(gpuEventCreateWithFlags(&e, gpuEventDisableTiming));
  return e;
}

void destroy_event(void* e) {
  if (e == nullptr) return;
  if (gpuEventDestroy(static_cast<gpuEvent_t>(e)) != gpuSuccess) {
    (void)gpuGetLastError();
    HG_LOG_WARN("destroying a batch upload event failed");
  }
}

// A tensor of `shape` and `dtype` over `storage` (which holds at least its bytes).
Tensor view_of(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace

// Pinned blocks; a block handed out comes back when its last tensor is gone, and is handed out
// again for a request of its exact size (batches have one or two sizes). A vector, not a map:
// clang 15 compiling this file as HIP crashes instantiating std::multimap of a move-only type.
struct BatchUploader::Pool {
  std::mutex mutex;
  std::vector<PinnedBuffer> free;
  size_t bytes = 0;  // every block, handed out or free

  std::shared_ptr<PinnedBuffer> take(size_t size, const std::shared_ptr<Pool>& self) {
    PinnedBuffer block;
    {
      std::lock_guard lock(mutex);
      for (size_t i = 0; i < free.size(); ++i)
        if (free[i].bytes() == size) {
          block = std::move(free[i]);
          free.erase(free.begin() + std::ptrdiff_t(i));
          break;
        }
    }
    if (!block.data()) {
      block = PinnedBuffer(size);
      std::lock_guard lock(mutex);
      bytes += size;
    }
    std::weak_ptr<Pool> pool = self;
    return std::shared_ptr<PinnedBuffer>(new PinnedBuffer(std::move(block)),
                                         [pool](PinnedBuffer* b) {
                                           if (auto p = pool.lock()) {
                                             std::lock_guard lock(p->mutex);
                                             p->free.push_back(std::move(*b));
                                           }
                                           delete b;
                                         });
  }
};

struct BatchUploader::Slot {
  Tensor device_buffer;       // U8, at least the largest batch uploaded through this slot
  PinnedBuffer staging;       // for pageable host tensors
  Tensor host;                // the pinned host tensor of the copy in flight, kept alive
  void* copied = nullptr;     // event on the copy stream: this slot's last copy finished
  void* consumed = nullptr;   // event on the compute stream: work on this slot's batch issued
  bool has_consumed = false;  // `consumed` has been recorded since the slot's last copy
  bool has_copied = false;
};

BatchUploader::BatchUploader(int device, int slots) : device_(device) {
  HG_CHECK(slots >= 2, "BatchUploader: needs at least 2 slots, got {}", slots);
  set_device(device);
  gpuStream_t s = nullptr;
  HG_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  copy_stream_ = s;
  pool_ = std::make_shared<Pool>();
  for (int i = 0; i < slots; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->copied = new_event();
    slot->consumed = new_event();
    slots_.push_back(std::move(slot));
  }
}

BatchUploader::~BatchUploader() {
  // Copies in flight read host memory this object frees: wait for them.
  if (copy_stream_ != nullptr &&
      gpuStreamSynchronize(static_cast<gpuStream_t>(copy_stream_)) != gpuSuccess) {
    (void)gpuGetLastError();
    HG_LOG_WARN("waiting for the batch upload stream failed");
  }
  for (auto& slot : slots_) {
    destroy_event(slot->copied);
    destroy_event(slot->consumed);
  }
  slots_.clear();
  if (copy_stream_ != nullptr &&
      gpuStreamDestroy(static_cast<gpuStream_t>(copy_stream_)) != gpuSuccess) {
    (void)gpuGetLastError();
    HG_LOG_WARN("destroying the batch upload stream failed");
  }
}

Tensor BatchUploader::pinned_empty(const Shape& shape, DType dtype) {
  const size_t bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  std::shared_ptr<PinnedBuffer> block = pool_->take(std::max<size_t>(bytes, 1), pool_);
  void* data = block->data();
  return view_of(std::make_shared<Storage>(data, bytes, Device::cpu(), std::move(block)), shape,
                 dtype);
}

size_t BatchUploader::pinned_bytes() const {
  size_t staging = 0;
  for (const auto& slot : slots_) staging += slot->staging.bytes();
  std::lock_guard lock(pool_->mutex);
  return pool_->bytes + staging;
}

Tensor BatchUploader::upload(const Tensor& host) {
  HG_CHECK(host.device().is_cpu() && host.is_contiguous(),
           "BatchUploader::upload: needs a contiguous CPU tensor, got {}", host.describe());
  set_device(device_);
  const gpuStream_t compute = stream(device_);
  const auto copy = static_cast<gpuStream_t>(copy_stream_);
  // Everything issued so far includes all work on the previous batch: its slot may be
  // rewritten once the device has done that work.
  if (uploads_ > 0) {
    Slot& previous = *slots_[(next_ + slots_.size() - 1) % slots_.size()];
    HG_GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(previous.consumed), compute));
    previous.has_consumed = true;
  }
  Slot& slot = *slots_[next_];
  next_ = (next_ + 1) % slots_.size();
  ++uploads_;
  const size_t bytes = host.nbytes();
  // The slot's previous copy must be finished before its staging buffer or host tensor is
  // reused or released (it is, normally: `slots - 1` batches have been issued since).
  if (slot.has_copied) HG_GPU_CHECK(gpuEventSynchronize(static_cast<gpuEvent_t>(slot.copied)));
  slot.host = Tensor();
  if (!slot.device_buffer.defined() || slot.device_buffer.nbytes() < bytes) {
    // The old buffer's readers were issued on the compute stream before this point, so the
    // caching allocator may hand its block out again to later compute work.
    slot.device_buffer = Tensor();
    slot.device_buffer =
        Tensor::empty({int64_t(std::max<size_t>(bytes, 1))}, DType::U8, Device::gpu(device_));
  }
  const void* source = host.data_ptr();
  if (bytes > 0 && is_pinned(source)) {
    slot.host = host;  // kept alive until the copy has finished
  } else {
    if (slot.staging.bytes() < bytes) slot.staging = PinnedBuffer(bytes);
    if (bytes > 0) std::memcpy(slot.staging.data(), source, bytes);
    source = slot.staging.data();
  }
  if (slot.has_consumed)
    HG_GPU_CHECK(gpuStreamWaitEvent(copy, static_cast<gpuEvent_t>(slot.consumed), 0));
  slot.has_consumed = false;
  if (bytes > 0)
    HG_GPU_CHECK(
        gpuMemcpyAsync(slot.device_buffer.data_ptr(), source, bytes, gpuMemcpyHostToDevice, copy));
  HG_GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(slot.copied), copy));
  slot.has_copied = true;
  HG_GPU_CHECK(gpuStreamWaitEvent(compute, static_cast<gpuEvent_t>(slot.copied), 0));
  return view_of(slot.device_buffer.storage(), host.shape(), host.dtype());
}

}  // namespace hg::gpu
