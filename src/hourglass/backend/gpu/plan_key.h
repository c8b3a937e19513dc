// Keys of the plan caches the vendor-library wrappers keep (a convolution's or a matrix
// product's descriptors and chosen algorithm per shape), and the pointer alignment that enters
// them. Vendor-neutral: shared by the cuDNN, MIOpen, cuBLASLt and hipBLASLt wrappers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace hg::gpu {

// N integers describing a call completely (sizes, parameters, dtype, modes, alignments).
template <size_t N>
struct PlanKey {
  std::array<int64_t, N> v;
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  template <size_t N>
  size_t operator()(const PlanKey<N>& key) const {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (const int64_t x : key.v) h ^= uint64_t(x) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return size_t(h);
  }
};

// The largest power of two, at most `cap`, dividing every address. Allocator blocks are
// 512-byte aligned; views at an offset (a micro-batch cut from a batch) may be less.
inline uint32_t pointer_alignment(std::initializer_list<const void*> pointers, uint32_t cap) {
  uintptr_t bits = cap;
  for (const void* p : pointers) bits |= reinterpret_cast<uintptr_t>(p);
  return uint32_t(bits & (~bits + 1));
}

}  // namespace hg::gpu
