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
//
// A pool with a plan (GraphPool::plan) holds one more block, laid out from a trace of the same
// work run eagerly (memory_plan.h): requests that follow the trace take their places in it, so
// the graph needs about the most bytes its work holds at once rather than each size's own
// peak summed over sizes. Sharing bytes there is safe by the ordering argument above (a place
// is reused only by work captured after its last user), and a place is never handed out while
// a block overlapping it is held, whatever the trace said.
#include "hourglass/device/gpu/gpu_allocator.h"

#include "hourglass/device/allocation_tag.h"
#include "hourglass/device/device.h"

#include <array>
#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <thread>
#include <vector>

#include "hourglass/base/byte_size.h"
#include "hourglass/base/error.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

namespace {

std::atomic<bool> g_poison{false};

// The graph pool this thread's requests to device t_route_device go to (0: none).
thread_local int t_route_device = -1;
thread_local uint64_t t_route_pool = 0;
// Whether this thread's pool requests skip the pool's free blocks (FreshPoolBlocks).
thread_local bool t_fresh_pool_blocks = false;

using FreeBlocks = std::unordered_map<size_t, std::vector<void*>>;  // block size -> blocks

// How far past the next traced request a routed request of a planned pool looks for one of its
// size: the capture skips what only the traced run did (a first step's optimizer state, the
// batch-norm snapshot of an out-of-memory retry).
constexpr size_t kPlanLookAhead = 64;
constexpr size_t kUnplanned = SIZE_MAX;

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
  void plan_pool(uint64_t pool, const std::vector<TracedRequest>& requests);
  GraphPool::PlanUse plan_use(uint64_t pool) const;
  void start_trace();
  std::vector<TracedRequest> finish_trace();

 private:
  struct Block {
    size_t size;
    uint64_t pool;          // 0: the common cache's
    void* arena = nullptr;  // the planned block holding it, if any
  };
  // A pool's planned block: the traced requests, each one's offset (kUnplanned: held past the
  // trace's end, so served outside), the next to match, and the places held now.
  struct Arena {
    void* base = nullptr;
    size_t bytes = 0;
    std::vector<TracedRequest> requests;
    std::vector<size_t> offsets;
    size_t next = 0;
    std::map<size_t, size_t> held;  // offset -> end
    size_t most_held = 0;
    int64_t placed = 0, elsewhere = 0;
  };
  struct Pool {
    FreeBlocks free;
    size_t bytes = 0;  // every block of the pool's, free or not
    Arena arena;
  };
  struct Trace {
    bool active = false;
    std::thread::id thread;
    std::vector<TracedRequest> requests;
    std::unordered_map<void*, size_t> open;  // held block -> its request
    int64_t events = 0;
  };
  void* allocate_in_pool_locked(uint64_t pool, size_t bytes, size_t size);
  void* take_planned_locked(Arena& arena, size_t size);
  void trace_request_locked(void* ptr, size_t size);
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
  // Planned blocks of destroyed pools with places still held: base -> {bytes, places held}.
  std::unordered_map<void*, std::pair<size_t, size_t>> orphan_arenas_;
  Trace trace_;
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
  trace_request_locked(ptr, size);
  return ptr;
}

void GpuAllocator::trace_request_locked(void* ptr, size_t size) {
  if (!trace_.active || std::this_thread::get_id() != trace_.thread) return;
  trace_.open[ptr] = trace_.requests.size();
  trace_.requests.push_back({size, trace_.events++, TracedRequest::kNeverFreed, allocation_tag()});
}

// The place in the plan of a request of `size` (see GraphPool::plan), or nullptr.
void* GpuAllocator::take_planned_locked(Arena& a, size_t size) {
  if (a.base == nullptr) return nullptr;
  const size_t end = std::min(a.requests.size(), a.next + kPlanLookAhead);
  for (size_t i = a.next; i < end; ++i) {
    if (a.requests[i].size != size) continue;
    a.next = i + 1;
    const size_t offset = a.offsets[i];
    if (t_fresh_pool_blocks || offset == kUnplanned) return nullptr;
    auto after = a.held.lower_bound(offset);
    if (after != a.held.end() && after->first < offset + size) return nullptr;
    if (after != a.held.begin() && std::prev(after)->second > offset) return nullptr;
    a.held.emplace(offset, offset + size);
    return static_cast<char*>(a.base) + offset;
  }
  return nullptr;
}

// A pool's blocks are counted in use from the moment the pool takes them until it is destroyed.
void* GpuAllocator::allocate_in_pool_locked(uint64_t pool, size_t bytes, size_t size) {
  auto it = pools_.find(pool);
  HG_ASSERT(it != pools_.end(), "gpu:{} allocator: a request routed to a destroyed pool", index_);
  Pool& p = it->second;
  if (void* planned = take_planned_locked(p.arena, size)) {
    live_.emplace(planned, Block{size, pool, p.arena.base});
    ++stats_.allocations;
    ++p.arena.placed;
    try {
      poison_locked(planned, size);
    } catch (...) {
      live_.erase(planned);
      p.arena.held.erase(size_t(static_cast<char*>(planned) - static_cast<char*>(p.arena.base)));
      throw;
    }
    return planned;
  }
  if (p.arena.base != nullptr) ++p.arena.elsewhere;
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
  if (trace_.active) {
    if (auto t = trace_.open.find(ptr); t != trace_.open.end()) {
      trace_.requests[t->second].freed = trace_.events++;
      trace_.open.erase(t);
    }
  }
  if (block.arena != nullptr) {
    const size_t offset = size_t(static_cast<char*>(ptr) - static_cast<char*>(block.arena));
    if (auto p = pools_.find(block.pool); p != pools_.end()) {
      p->second.arena.held.erase(offset);  // the place stays the graph's
      return;
    }
    auto o = orphan_arenas_.find(block.arena);
    HG_ASSERT(o != orphan_arenas_.end(), "gpu:{} allocator: a planned block without its pool",
              index_);
    if (--o->second.second == 0) {
      stats_.in_use -= o->second.first;
      cached_[o->second.first].push_back(block.arena);
      cached_bytes_ += o->second.first;
      orphan_arenas_.erase(o);
    }
    return;
  }
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
  const Arena& a = it->second.arena;
  if (a.base != nullptr && a.held.empty()) {
    stats_.in_use -= a.bytes;
    cached_[a.bytes].push_back(a.base);
    cached_bytes_ += a.bytes;
  } else if (a.base != nullptr) {
    orphan_arenas_[a.base] = {a.bytes, a.held.size()};
  }
  pools_.erase(it);
}

void GpuAllocator::plan_pool(uint64_t pool, const std::vector<TracedRequest>& requests) {
  // Only what the trace freed is laid out: a block held past its end (the step's loss, a first
  // step's optimizer state) would pin its place for the graph's life.
  std::vector<TracedRequest> freed;
  std::vector<size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].freed == TracedRequest::kNeverFreed) continue;
    freed.push_back(requests[i]);
    index.push_back(i);
  }
  const MemoryPlan plan = plan_memory(freed, kBlockQuantum);
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  HG_ASSERT(it != pools_.end(), "gpu:{} allocator: planning a destroyed pool", index_);
  Pool& p = it->second;
  HG_ASSERT(p.arena.base == nullptr && p.bytes == 0, "gpu:{} allocator: a pool planned twice",
            index_);
  if (plan.bytes == 0) return;
  set_device(index_);
  if (limit_ != 0 && stats_.in_use + plan.bytes > limit_) {
    ++stats_.failures;
    throw_oom_locked(plan.bytes, fmt::format("which would exceed the allocator's limit of {}",
                                             format_mib(limit_)));
  }
  void* base = take_cached_locked(plan.bytes);
  if (!base) base = new_block_locked(plan.bytes, plan.bytes, /*may_release_cache=*/true);
  Arena& a = p.arena;
  a.base = base;
  a.bytes = plan.bytes;
  a.most_held = plan.most_held;
  a.requests = requests;
  a.offsets.assign(requests.size(), kUnplanned);
  for (size_t k = 0; k < index.size(); ++k) a.offsets[index[k]] = plan.offsets[k];
  p.bytes += plan.bytes;
  stats_.in_use += plan.bytes;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
}

GraphPool::PlanUse GpuAllocator::plan_use(uint64_t pool) const {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return {};
  const Arena& a = it->second.arena;
  return {a.bytes, a.most_held, a.placed, a.elsewhere};
}

void GpuAllocator::start_trace() {
  std::lock_guard lock(mutex_);
  HG_ASSERT(!trace_.active, "gpu:{} allocator: traces do not overlap", index_);
  trace_ = Trace{};
  trace_.active = true;
  trace_.thread = std::this_thread::get_id();
}

std::vector<TracedRequest> GpuAllocator::finish_trace() {
  std::lock_guard lock(mutex_);
  trace_.active = false;
  trace_.open.clear();
  return std::move(trace_.requests);
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

void GraphPool::plan(const std::vector<TracedRequest>& requests) {
  static_cast<GpuAllocator&>(allocator(device_)).plan_pool(id_, requests);
}

GraphPool::PlanUse GraphPool::plan_use() const {
  return static_cast<GpuAllocator&>(allocator(device_)).plan_use(id_);
}

AllocationTrace::AllocationTrace(int device) : device_(device) {
  static_cast<GpuAllocator&>(allocator(device_)).start_trace();
}

AllocationTrace::~AllocationTrace() {
  if (open_) (void)finish();
}

std::vector<TracedRequest> AllocationTrace::finish() {
  HG_ASSERT(open_, "an allocation trace finished twice");
  open_ = false;
  return static_cast<GpuAllocator&>(allocator(device_)).finish_trace();
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
