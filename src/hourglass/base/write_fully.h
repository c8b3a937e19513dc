// The one write loop: all of a buffer to a file descriptor, through short writes and signals.
#pragma once

#include <cstddef>

namespace hg {

// Writes `bytes` bytes from `data` to `fd`, retrying after a short write or an interrupted
// call (EINTR). False on a failed write, with errno saying why (EIO for a write that wrote
// nothing); some of the bytes may have been written then.
bool write_fully(int fd, const void* data, size_t bytes);

}  // namespace hg
