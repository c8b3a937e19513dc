// Page-locked ("pinned") host memory, and reading a device scalar without waiting for it: the
// trainer starts the read of step k's loss after issuing step k and takes the value while step
// k+1 runs, so the host never stalls the device to print progress. Plain C++ (no vendor header).
#pragma once

#include <cstddef>

#include "hourglass/base/dtype.h"

namespace hg {
class Tensor;
}

namespace hg::gpu {

// Whether `host` points into page-locked memory the runtime knows (pinned copies are truly
// asynchronous; pageable ones are staged by the runtime).
bool is_pinned(const void* host);

// A block of pinned host memory (gpuMallocHost / gpuFreeHost). Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // Throws an OutOfMemory Error when the runtime cannot pin `bytes`.
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void reset() noexcept;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// One element of a GPU tensor read into pinned memory asynchronously:
//   AsyncScalar loss;          // once
//   loss.start(loss_tensor);   // after issuing the step: a copy and an event on its stream
//   ... issue more work ...
//   if (loss.ready()) ...      // polls the event, never blocks
//   double v = loss.value();   // waits for the event (returns at once when ready)
// The tensor need not outlive start(): the allocator reuses its block only for work queued
// behind the copy on the same stream. A new start() replaces the previous read.
class AsyncScalar {
 public:
  AsyncScalar();  // allocates nothing: the pinned word and the event come with start()
  ~AsyncScalar();
  AsyncScalar(const AsyncScalar&) = delete;
  AsyncScalar& operator=(const AsyncScalar&) = delete;

  // `scalar`: a one-element tensor on a GPU, of any dtype.
  void start(const Tensor& scalar);
  // A read has been started (and not necessarily finished).
  bool started() const { return device_ >= 0; }
  // The started read has finished (false when none was started).
  bool ready() const;
  // Waits for the started read and returns its value converted to double.
  double value() const;

 private:
  PinnedBuffer buffer_;
  void* event_ = nullptr;  // the runtime's event handle
  int device_ = -1;        // device of the started read, -1 before start()
  DType dtype_ = DType::F32;
};

}  // namespace hg::gpu
