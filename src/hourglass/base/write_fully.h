// The one write loop: all of a buffer to a file descriptor, through short writes and signals;
// and its reading twin at an offset.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hg {

// Writes `bytes` bytes from `data` to `fd`, retrying after a short write or an interrupted
// call (EINTR). False on a failed write, with errno saying why (EIO for a write that wrote
// nothing); some of the bytes may have been written then.
bool write_fully(int fd, const void* data, size_t bytes);

// Reads `bytes` bytes at `offset` of `fd` into `data` with pread, retrying after a short read or
// an interrupted call. Returns the bytes read: fewer when the file ends first, -1 on a failed
// read (errno says why).
int64_t pread_fully(int fd, void* data, size_t bytes, uint64_t offset);

}  // namespace hg
