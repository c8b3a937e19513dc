// The kernel behind set_side_stream_delay_for_testing (side_stream.h).
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// One thread that spins for about `cycles` of the GPU's clock on `stream`.
void launch_spin(int64_t cycles, gpuStream_t stream);

}  // namespace hg::gpu
