#include "hourglass/device/allocator.h"

#include <cstdlib>
#include <mutex>

#include "hourglass/base/byte_size.h"
#include "hourglass/base/error.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#endif

namespace hg {

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    static CpuAllocator cpu;
    return cpu;
  }
#ifdef HOURGLASS_HAS_GPU
  return gpu::allocator(device.index);
#else
  throw_invalid(
      fmt::format("device {} requested but this hourglass has no GPU backend", device.str()),
      "use device = \"cpu\", or rebuild with -DHOURGLASS_GPU=cuda or hip");
#endif
}

namespace {
// Block sizes: multiples of 64 bytes up to 64 KiB, then of 64 KiB, so that a cached block
// is reused for requests of nearly the same size.
size_t block_size(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  const size_t quantum = bytes <= (64u << 10) ? 64 : (64u << 10);
  return (bytes + quantum - 1) / quantum * quantum;
}
}  // namespace

CpuAllocator::~CpuAllocator() { empty_cache(); }

void* CpuAllocator::allocate(size_t bytes) {
  const size_t size = block_size(bytes);
  std::lock_guard lock(mutex_);
  if (limit_ != 0 && stats_.in_use + size > limit_) {
    ++stats_.failures;
    throw Error(ErrorKind::OutOfMemory,
                fmt::format("cpu out of memory: asked for {}, {} in use, limit {}",
                            format_mib(bytes), format_mib(stats_.in_use), format_mib(limit_)),
                "reduce batch_size or raise the memory limit");
  }
  void* ptr = nullptr;
  // Reuse a cached block of this size, or one at most 25% larger.
  auto it = cached_.lower_bound(size);
  if (it != cached_.end() && it->first <= size + size / 4) {
    ptr = it->second;
    live_[ptr] = it->first;
    stats_.in_use += it->first;
    cached_.erase(it);
  } else {
    if (limit_ != 0 && stats_.reserved + size > limit_) release_cached_locked();
    ptr = std::aligned_alloc(64, size);
    if (!ptr && !cached_.empty()) {
      release_cached_locked();
      ptr = std::aligned_alloc(64, size);
    }
    if (!ptr) {
      ++stats_.failures;
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("cpu out of memory: the system refused {} ({} in use)",
                              format_mib(bytes), format_mib(stats_.in_use)),
                  "reduce batch_size or free host memory");
    }
    live_[ptr] = size;
    stats_.in_use += size;
    stats_.reserved += size;
  }
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  ++stats_.allocations;
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  HG_ASSERT(it != live_.end(), "cpu allocator: freeing a block it did not hand out");
  stats_.in_use -= it->second;
  cached_.emplace(it->second, ptr);
  live_.erase(it);
}

void CpuAllocator::release_cached_locked() {
  for (auto& [size, ptr] : cached_) {
    std::free(ptr);
    stats_.reserved -= size;
  }
  cached_.clear();
}

void CpuAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

AllocatorStats CpuAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CpuAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
}

void CpuAllocator::set_limit(size_t bytes) {
  std::lock_guard lock(mutex_);
  limit_ = bytes;
  if (limit_ != 0 && stats_.reserved > limit_) release_cached_locked();
}

size_t CpuAllocator::limit() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

}  // namespace hg
