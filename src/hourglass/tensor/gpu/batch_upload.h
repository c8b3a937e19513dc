// Host-to-device uploads of training batches on a stream of their own, so that the copy of the
// next batch overlaps the computation on the current one. Plain C++ (no vendor header).
//
//   BatchUploader up(device);
//   Tensor host = up.pinned_empty({512, 224, 224, 3}, DType::U8);  // loader workers fill it
//   Tensor x = up.upload(host);   // returns at once; the device stream waits for the copy
//   ... issue the step on x ...
//
// A ring of `slots` device buffers: upload() writes the batch into the next slot on the copy
// stream, records an event there and makes the device's compute stream wait for it, so every
// op issued after upload() sees the batch and the host never waits. Contract: the caller issues
// all work on a batch before it uploads the next one (a training loop does), and holds no
// uploaded tensor beyond `slots - 1` further uploads, since its slot is then written again. Each
// upload() marks the compute stream's position; the copy into a slot waits (on the device) for
// the work issued before the slot's batch was superseded, so a slot is rewritten only once its
// batch is consumed. Host tensors that are not pinned are first copied into a pinned staging
// buffer of the slot (a host memcpy); pinned ones (pinned_empty) are copied from directly and
// kept alive until their copy has finished.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "hourglass/tensor/gpu/pinned.h"
#include "hourglass/tensor/tensor.h"

namespace hg::gpu {

class BatchUploader {
 public:
  explicit BatchUploader(int device, int slots = 3);
  ~BatchUploader();
  BatchUploader(const BatchUploader&) = delete;
  BatchUploader& operator=(const BatchUploader&) = delete;

  // A contiguous CPU tensor in pinned memory from this uploader's pool (thread-safe: loader
  // workers call it). Its block returns to the pool when the last reference goes; blocks are
  // kept by size for reuse.
  Tensor pinned_empty(const Shape& shape, DType dtype);

  // The device copy of `host` (a contiguous CPU tensor), valid for `slots - 1` further uploads.
  Tensor upload(const Tensor& host);

  int device() const { return device_; }
  // Bytes of pinned host memory the pool and the staging buffers hold.
  size_t pinned_bytes() const;

 private:
  struct Slot;
  struct Pool;

  int device_;
  void* copy_stream_ = nullptr;  // the runtime's stream handle
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t next_ = 0;
  int64_t uploads_ = 0;
  std::shared_ptr<Pool> pool_;  // shared with the blocks it hands out
};

}  // namespace hg::gpu
