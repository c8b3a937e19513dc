// Device memory allocators behind one interface: the CPU's (aligned host memory) and the
// GPU's caching stream-ordered pool (device/gpu/gpu_allocator.h). Each keeps statistics and
// honours a settable limit, which the out-of-memory policy uses to find and recover from
// memory pressure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include "hourglass/device/device.h"

namespace hg {

struct AllocatorStats {
  size_t in_use = 0;       // bytes handed out and not yet returned
  size_t reserved = 0;     // bytes held from the system (in use + cached)
  size_t peak_in_use = 0;  // high-water mark of in_use since the last reset
  uint64_t allocations = 0;
  uint64_t failures = 0;  // requests refused (limit or system)
  // Requests the cache could not serve, which went to the system (a GPU's runtime allocation,
  // which may wait for the device), and the host time they took; 0 where not counted (CPU).
  uint64_t system_allocations = 0;
  double system_seconds = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for `bytes` (64-byte aligned) or throws an OutOfMemory Error that names
  // the request, what is in use and the limit.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  // 0 means no limit beyond the system's.
  virtual void set_limit(size_t bytes) = 0;
  virtual size_t limit() const = 0;
  // Returns cached, unused memory to the system.
  virtual void empty_cache() {}
  virtual Device device() const = 0;
};

// The allocator for a device: the CPU's, or the GPU backend's caching allocator (an
// InvalidInput error in a build without one).
Allocator& allocator_for(Device device);

// Host memory with statistics, an optional limit, and a cache of freed blocks. A training step
// allocates the same sizes every time; handing back cached blocks avoids the page faults of
// fresh memory (first touch of a new mapping costs more than the op that writes it).
class CpuAllocator final : public Allocator {
 public:
  ~CpuAllocator() override;
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  // The limit applies to bytes in use; cached blocks are released to stay under it.
  void set_limit(size_t bytes) override;
  size_t limit() const override;
  void empty_cache() override;
  Device device() const override { return Device::cpu(); }

 private:
  void release_cached_locked();

  mutable std::mutex mutex_;
  AllocatorStats stats_;
  size_t limit_ = 0;
  std::multimap<size_t, void*> cached_;     // block size -> free block
  std::unordered_map<void*, size_t> live_;  // block -> its size
};

}  // namespace hg
