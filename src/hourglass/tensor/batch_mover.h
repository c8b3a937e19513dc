// Moves training batches from the host to the device a run computes on. On a GPU through
// gpu::BatchUploader (tensor/gpu/batch_upload.h): copies on a stream of their own that overlap
// the step in flight, from pinned host buffers the loader can fill directly (host_empty). On
// the CPU, or in a build without GPUs, batches stay where they are. Build-neutral: the trainer
// uses it without knowing the GPU runtime.
//
// Contract (the uploader's): all work on a moved batch is issued before the next move, and a
// moved tensor is not held beyond kSlots - 1 further moves.
#pragma once

#include <memory>

#include "hourglass/tensor/tensor.h"

namespace hg {

class BatchMover {
 public:
  static constexpr int kSlots = 3;
  explicit BatchMover(Device device);
  ~BatchMover();
  BatchMover(const BatchMover&) = delete;
  BatchMover& operator=(const BatchMover&) = delete;

  // An empty host tensor for a batch: pinned memory when moving to a GPU (thread-safe).
  Tensor host_empty(const Shape& shape, DType dtype);
  // `t` on the device: returned as is when it already is there, else copied (a contiguous CPU
  // tensor).
  Tensor move(const Tensor& t);

  Device device() const { return device_; }

 private:
  struct Impl;
  Device device_;
  std::unique_ptr<Impl> impl_;  // null unless moving to a GPU
};

}  // namespace hg
