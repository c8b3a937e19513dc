// The GPU's caching, stream-ordered allocator (see gpu_allocator.cpp for the policy).
#pragma once

#include "hourglass/device/allocator.h"

namespace hg::gpu {

// The allocator of GPU `index` (created on first use; lives for the process). Throws
// InvalidInput when the machine has no such GPU.
Allocator& allocator(int index);

// Tests: when on, every block handed out is first filled with 0xFF bytes (NaN in every float
// dtype), so an op that leaves an output element unwritten produces a NaN the test catches.
void set_poison(bool on);
bool poison();

// Block sizes are rounded up to multiples of this many bytes; a freed block is reused for a
// request of the same rounded size.
inline constexpr size_t kBlockQuantum = 512;

}  // namespace hg::gpu
