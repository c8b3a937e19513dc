#include "hourglass/backend/gpu/side_stream.h"

#include <array>
#include <atomic>
#include <utility>

#include "hourglass/backend/gpu/side_stream_delay.h"
#include "hourglass/backend/gpu/side_stream_kernels.h"
#include "hourglass/base/error.h"

namespace hg::gpu {

namespace {
std::atomic<int64_t> g_delay_cycles{0};
}  // namespace

void set_side_stream_delay_for_testing(int64_t cycles) {
  g_delay_cycles.store(cycles, std::memory_order_relaxed);
}

// A thread's side streams are never destroyed, like the device's main stream: a thread may end
// after the runtime has begun tearing the device down, and a backward joins its pieces before
// it returns. (A thread_local map holding them, with its destructor, also crashes the HIP
// toolchain's clang 15 while it compiles this file.)
SideStream& SideStream::of(int index) {
  constexpr int kMaxDevices = 64;
  thread_local std::array<SideStream*, kMaxDevices> streams{};
  HG_ASSERT(index >= 0 && index < kMaxDevices, "GPU index {} out of range", index);
  SideStream*& s = streams[size_t(index)];
  if (s == nullptr) s = new SideStream(index);
  return *s;
}

SideStream::SideStream(int index) : index_(index) {
  set_device(index);
  HG_GPU_CHECK(gpuStreamCreateWithFlags(&stream_, gpuStreamNonBlocking));
  HG_GPU_CHECK(gpuEventCreateWithFlags(&forked_, gpuEventDisableTiming));
}

gpuEvent_t SideStream::take_event() {
  if (spare_events_.empty()) {
    gpuEvent_t e = nullptr;
    HG_GPU_CHECK(gpuEventCreateWithFlags(&e, gpuEventDisableTiming));
    return e;
  }
  gpuEvent_t e = spare_events_.back();
  spare_events_.pop_back();
  return e;
}

gpuStream_t SideStream::begin() {
  set_device(index_);
  HG_GPU_CHECK(gpuEventRecord(forked_, stream(index_)));
  HG_GPU_CHECK(gpuStreamWaitEvent(stream_, forked_, 0));
  if (const int64_t cycles = g_delay_cycles.load(std::memory_order_relaxed); cycles > 0)
    launch_spin(cycles, stream_);
  return stream_;
}

void SideStream::end(std::vector<Tensor> keep) {
  const gpuEvent_t done = take_event();
  HG_GPU_CHECK(gpuEventRecord(done, stream_));
  pieces_.push_back(Piece{done, std::move(keep)});
}

void SideStream::retire(size_t in_flight) {
  if (pieces_.size() <= in_flight) return;
  const size_t n = pieces_.size() - in_flight;
  set_device(index_);
  // The side stream runs its pieces in order: waiting for the newest of them covers the rest.
  HG_GPU_CHECK(gpuStreamWaitEvent(stream(index_), pieces_[n - 1].done, 0));
  for (size_t i = 0; i < n; ++i) spare_events_.push_back(pieces_[i].done);
  pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace hg::gpu
