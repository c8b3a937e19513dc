// The GPU's caching allocator: one per device, blocks rounded up to 512-byte size classes,
// freed blocks kept per size class and handed back at once for the next request of that size.
//
// Why reuse is safe without events: every op, copy and fill on a device is issued to that
// device's one stream (gpu::stream(index)), in host order. A block freed by the host may still be
// read or written by work already queued; the next owner's work is queued behind it on the same
// stream, so it cannot start before that work has finished. Anything that issues work on another
// stream (a copy engine stream, a second compute stream) must make that stream wait on this one
// before it touches allocator memory, or keep the tensor alive until its work has finished.
//
// A training step allocates the same sizes every time, so after the first step every request
// is served from the cache without a driver call. When the driver refuses memory the cache is
// released (after the stream has finished with it) and the request retried once; then an
// OutOfMemory Error names the request, the allocator's view and the device's.
//
// Graph pools (gpu_allocator.h) keep a free list of their own. A request routed to a pool
// takes a block from it, else a free block of the size from the common cache (free blocks can
// change owner at any time, by the ordering argument above), else new memory; it never
// releases the cache, since that waits for the stream, which a capture forbids. Under
// FreshPoolBlocks a request skips the pool's own free blocks: the capture's earlier work may
// have used them.
#include "hourglass/device/gpu/gpu_allocator.h"

#include <array>
#include <atomic>
#include <chrono>
#include <vector>

#include "hourglass/base/byte_size.h"
#include "hourglass/base/error.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

namespace {

constexpr int kMaxDevices = 64;

std::atomic<bool> g_poison{false};

// The graph pool this thread's requests to device t_route_device go to (0: none).
thread_local int t_route_device = -1;
thread_local uint64_t t_route_pool = 0;
// Whether this thread's pool requests skip the pool's free blocks (FreshPoolBlocks).
thread_local bool t_fresh_pool_blocks = false;

using FreeBlocks = std::unordered_map<size_t, std::vector<void*>>;  // block size -> blocks

void* take_free(FreeBlocks& free, size_t size) {
  auto it = free.find(size);
  if (it == free.end() || it->second.empty()) return nullptr;
  void* ptr = it->second.back();
  it->second.pop_back();
  return ptr;
}

size_t block_size(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  return (bytes + kBlockQuantum - 1) / kBlockQuantum * kBlockQuantum;
}

class GpuAllocator final : public Allocator {
 public:
  explicit GpuAllocator(int index) : index_(index) {}
  // Never destroyed (see allocator()): freeing device memory during static destruction races
  // the runtime's own teardown.
  ~GpuAllocator() override = default;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void set_limit(size_t bytes) override;
  size_t limit() const override;
  void empty_cache() override;
  Device device() const override { return Device::gpu(index_); }

  uint64_t create_pool();
  void destroy_pool(uint64_t pool);
  size_t pool_bytes(uint64_t pool) const;

 private:
  struct Block {
    size_t size;
    uint64_t pool;  // 0: the common cache's
  };
  struct Pool {
    FreeBlocks free;
    size_t bytes = 0;  // every block of the pool's, free or not
  };
  void* allocate_in_pool_locked(uint64_t pool, size_t bytes, size_t size);
  void* new_block_locked(size_t bytes, size_t size, bool may_release_cache);
  void poison_locked(void* ptr, size_t size);
  void* take_cached_locked(size_t size);
  void release_cached_locked();
  [[noreturn]] void throw_oom_locked(size_t bytes, const std::string& cause);

  const int index_;
  mutable std::mutex mutex_;
  AllocatorStats stats_;
  size_t limit_ = 0;
  FreeBlocks cached_;
  size_t cached_bytes_ = 0;
  std::unordered_map<void*, Block> live_;
  std::unordered_map<uint64_t, Pool> pools_;
  uint64_t next_pool_ = 1;
};

void* GpuAllocator::take_cached_locked(size_t size) {
  void* ptr = take_free(cached_, size);
  if (ptr) cached_bytes_ -= size;
  return ptr;
}

void GpuAllocator::release_cached_locked() {
  if (cached_bytes_ == 0) return;
  set_device(index_);
  // Work queued before the blocks were freed may still use them.
  HG_GPU_CHECK(gpuStreamSynchronize(stream(index_)));
  gpuError_t first_error = gpuSuccess;
  for (auto& [size, blocks] : cached_) {
    for (void* ptr : blocks) {
      const gpuError_t err = gpuFree(ptr);
      if (err != gpuSuccess && first_error == gpuSuccess) first_error = err;
      stats_.reserved -= size;
    }
  }
  cached_.clear();
  cached_bytes_ = 0;
  HG_GPU_CHECK(first_error);
}

void GpuAllocator::throw_oom_locked(size_t bytes, const std::string& cause) {
  std::string device_memory;
  size_t free_bytes = 0, total_bytes = 0;
  if (gpuMemGetInfo(&free_bytes, &total_bytes) == gpuSuccess) {
    device_memory = fmt::format("the device has {} free of {} total", format_mib(free_bytes),
                                format_mib(total_bytes));
  } else {
    (void)gpuGetLastError();
    device_memory = "the device's free memory could not be read";
  }
  throw Error(
      ErrorKind::OutOfMemory,
      fmt::format("gpu:{} out of memory: asked for {} ({} bytes), {}; {} in use, {} reserved "
                  "({} of it cached), {}",
                  index_, format_mib(bytes), bytes, cause, format_mib(stats_.in_use),
                  format_mib(stats_.reserved), format_mib(cached_bytes_), device_memory),
      out_of_memory_remedy());
}

// gpuMalloc, also while this thread captures a graph: a capture in thread-local mode forbids the
// thread calls that might wait for the device, gpuMalloc among them, so the thread's mode is
// relaxed around it. Allocating during a capture is safe here: the memory is not part of the
// recorded work, the pool keeps it for the graph's life, and it is never freed before a replay.
gpuError_t malloc_even_capturing(void** ptr, size_t size) {
  gpuStreamCaptureMode mode = gpuStreamCaptureModeRelaxed;
  const gpuError_t exchanged = gpuThreadExchangeStreamCaptureMode(&mode);
  const gpuError_t err = gpuMalloc(ptr, size);
  if (exchanged == gpuSuccess) (void)gpuThreadExchangeStreamCaptureMode(&mode);
  return err;
}

// New device memory for a block of `size` bytes (counted as reserved, not yet in use).
void* GpuAllocator::new_block_locked(size_t bytes, size_t size, bool may_release_cache) {
  void* ptr = nullptr;
  const auto start = std::chrono::steady_clock::now();
  gpuError_t err = malloc_even_capturing(&ptr, size);
  ++stats_.system_allocations;
  stats_.system_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool had_cache = cached_bytes_ != 0;
  if (err == gpuErrorOutOfMemory && had_cache && may_release_cache) {
    (void)gpuGetLastError();
    release_cached_locked();
    err = malloc_even_capturing(&ptr, size);
  }
  if (err != gpuSuccess) {
    (void)gpuGetLastError();
    ++stats_.failures;
    if (err != gpuErrorOutOfMemory) throw_gpu_error(err, "gpuMalloc", __FILE__, __LINE__);
    throw_oom_locked(
        bytes,
        fmt::format("which the {} runtime refused ({}){}", kRuntimeName, gpuGetErrorName(err),
                    !had_cache          ? ""
                    : may_release_cache ? " even after the allocator released its cached "
                                          "blocks"
                                        : " while capturing a graph, when the cache "
                                          "cannot be released"));
  }
  stats_.reserved += size;
  return ptr;
}

void GpuAllocator::poison_locked(void* ptr, size_t size) {
  if (!g_poison.load(std::memory_order_relaxed)) return;
  const gpuError_t err = gpuMemsetAsync(ptr, 0xFF, size, stream(index_));
  if (err != gpuSuccess) throw_gpu_error(err, "gpuMemsetAsync (poison)", __FILE__, __LINE__);
}

void* GpuAllocator::allocate(size_t bytes) {
  const size_t size = block_size(bytes);
  const uint64_t pool = t_route_device == index_ ? t_route_pool : 0;
  std::lock_guard lock(mutex_);
  set_device(index_);
  if (pool != 0) return allocate_in_pool_locked(pool, bytes, size);
  if (limit_ != 0 && stats_.in_use + size > limit_) {
    ++stats_.failures;
    throw_oom_locked(
        bytes, fmt::format("which would exceed the allocator's limit of {}", format_mib(limit_)));
  }
  void* ptr = take_cached_locked(size);
  if (!ptr) ptr = new_block_locked(bytes, size, /*may_release_cache=*/true);
  try {
    poison_locked(ptr, size);
  } catch (...) {
    cached_[size].push_back(ptr);
    cached_bytes_ += size;
    throw;
  }
  live_.emplace(ptr, Block{size, 0});
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  ++stats_.allocations;
  return ptr;
}

// A pool's blocks are counted in use from the moment the pool takes them until it is destroyed.
void* GpuAllocator::allocate_in_pool_locked(uint64_t pool, size_t bytes, size_t size) {
  auto it = pools_.find(pool);
  HG_ASSERT(it != pools_.end(), "gpu:{} allocator: a request routed to a destroyed pool", index_);
  Pool& p = it->second;
  void* ptr = t_fresh_pool_blocks ? nullptr : take_free(p.free, size);
  if (!ptr) {
    if (limit_ != 0 && stats_.in_use + size > limit_) {
      ++stats_.failures;
      throw_oom_locked(
          bytes, fmt::format("which would exceed the allocator's limit of {}", format_mib(limit_)));
    }
    ptr = take_cached_locked(size);
    if (!ptr) ptr = new_block_locked(bytes, size, /*may_release_cache=*/false);
    p.bytes += size;
    stats_.in_use += size;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  }
  live_.emplace(ptr, Block{size, pool});
  ++stats_.allocations;
  try {
    poison_locked(ptr, size);
  } catch (...) {
    live_.erase(ptr);
    p.free[size].push_back(ptr);
    throw;
  }
  return ptr;
}

void GpuAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  HG_ASSERT(it != live_.end(), "gpu:{} allocator: freeing a block it did not hand out", index_);
  const Block block = it->second;
  live_.erase(it);
  if (block.pool != 0) {
    if (auto p = pools_.find(block.pool); p != pools_.end()) {
      p->second.free[block.size].push_back(ptr);  // still the graph's, still in use
      return;
    }
  }
  stats_.in_use -= block.size;
  cached_[block.size].push_back(ptr);
  cached_bytes_ += block.size;
}

uint64_t GpuAllocator::create_pool() {
  std::lock_guard lock(mutex_);
  const uint64_t id = next_pool_++;
  pools_.emplace(id, Pool{});
  return id;
}

void GpuAllocator::destroy_pool(uint64_t pool) {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  for (auto& [size, blocks] : it->second.free) {
    for (void* ptr : blocks) {
      stats_.in_use -= size;
      cached_[size].push_back(ptr);
      cached_bytes_ += size;
    }
  }
  pools_.erase(it);
}

size_t GpuAllocator::pool_bytes(uint64_t pool) const {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  return it == pools_.end() ? 0 : it->second.bytes;
}

AllocatorStats GpuAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void GpuAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
}

void GpuAllocator::set_limit(size_t bytes) {
  std::lock_guard lock(mutex_);
  limit_ = bytes;
}

size_t GpuAllocator::limit() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

void GpuAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

}  // namespace

Allocator& allocator(int index) {
  static std::array<std::atomic<GpuAllocator*>, kMaxDevices> allocators{};
  static std::mutex create_mutex;
  if (index >= 0 && index < kMaxDevices)
    if (GpuAllocator* a = allocators[size_t(index)].load(std::memory_order_acquire)) return *a;
  std::lock_guard lock(create_mutex);
  set_device(index);  // throws InvalidInput naming the GPUs there are when there is no `index`
  HG_ASSERT(index >= 0 && index < kMaxDevices, "gpu index {} out of range", index);
  std::atomic<GpuAllocator*>& slot = allocators[size_t(index)];
  if (!slot.load(std::memory_order_acquire))
    slot.store(new GpuAllocator(index), std::memory_order_release);  // lives for the process
  return *slot.load(std::memory_order_acquire);
}

GraphPool::GraphPool(int device)
    : device_(device), id_(static_cast<GpuAllocator&>(allocator(device)).create_pool()) {}

GraphPool::~GraphPool() { static_cast<GpuAllocator&>(allocator(device_)).destroy_pool(id_); }

size_t GraphPool::bytes() const {
  return static_cast<GpuAllocator&>(allocator(device_)).pool_bytes(id_);
}

FreshPoolBlocks::FreshPoolBlocks() : was_(t_fresh_pool_blocks) { t_fresh_pool_blocks = true; }

FreshPoolBlocks::~FreshPoolBlocks() { t_fresh_pool_blocks = was_; }

GraphPoolRoute::GraphPoolRoute(GraphPool& pool) {
  HG_ASSERT(t_route_pool == 0, "graph pool routes do not nest");
  t_route_device = pool.device_;
  t_route_pool = pool.id_;
}

GraphPoolRoute::~GraphPoolRoute() {
  t_route_device = -1;
  t_route_pool = 0;
}

void set_poison(bool on) { g_poison.store(on, std::memory_order_relaxed); }
bool poison() { return g_poison.load(std::memory_order_relaxed); }

}  // namespace hg::gpu
