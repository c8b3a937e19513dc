// The side stream's test delay (side_stream.h), in a header of its own: tests include it
// without the GPU runtime's headers.
#pragma once

#include <cstdint>

namespace hg::gpu {

// Tests: every piece of side-stream work begins with a kernel that spins for about `cycles`
// clock cycles on the side stream (0: none), so that a missing wait of the main stream shows up
// as a wrong result instead of hiding behind the side stream's usual speed. Process-wide.
void set_side_stream_delay_for_testing(int64_t cycles);

}  // namespace hg::gpu
