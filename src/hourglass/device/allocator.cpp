#include "hourglass/device/allocator.h"

#include <cstdlib>
#include <mutex>

#include "hourglass/base/error.h"

namespace hg {

namespace {
Allocator* (*g_gpu_factory)(int) = nullptr;

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / (1 << 20)); }
}  // namespace

void register_allocator(DeviceType type, Allocator* (*factory)(int index)) {
  HG_ASSERT(type == DeviceType::GPU, "only GPU allocators register");
  g_gpu_factory = factory;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    static CpuAllocator cpu;
    return cpu;
  }
  if (!g_gpu_factory)
    throw_invalid(fmt::format("device {} requested but this hourglass has no GPU backend",
                              device.str()),
                  "use device = \"cpu\", or rebuild with -DHOURGLASS_GPU=cuda or hip");
  return *g_gpu_factory(device.index);
}

void* CpuAllocator::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  {
    std::lock_guard lock(mutex_);
    if (limit_ != 0 && stats_.in_use + rounded > limit_) {
      ++stats_.failures;
      throw Error(ErrorKind::OutOfMemory,
                  fmt::format("cpu out of memory: asked for {}, {} in use, limit {}", mib(bytes),
                              mib(stats_.in_use), mib(limit_)),
                  "reduce batch_size or raise the memory limit");
    }
  }
  void* ptr = std::aligned_alloc(64, rounded);
  std::lock_guard lock(mutex_);
  if (!ptr) {
    ++stats_.failures;
    throw Error(ErrorKind::OutOfMemory,
                fmt::format("cpu out of memory: the system refused {} ({} in use)", mib(bytes),
                            mib(stats_.in_use)),
                "reduce batch_size or free host memory");
  }
  stats_.in_use += rounded;
  stats_.reserved = stats_.in_use;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  ++stats_.allocations;
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  std::free(ptr);
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  std::lock_guard lock(mutex_);
  stats_.in_use -= rounded;
  stats_.reserved = stats_.in_use;
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
}

size_t CpuAllocator::limit() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

}  // namespace hg
