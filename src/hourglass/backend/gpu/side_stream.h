// A second stream on a device for work the main stream (gpu::stream) needs only later: the
// backward's weight gradients (conv2d.cpp), which nothing reads until the parameters' update,
// run there beside the data gradients and batch norms of the layers below.
//
// Work goes to the side stream in pieces. begin() forks: the side stream waits for everything
// issued to the main stream so far. end(keep) closes the piece: `keep` holds the tensors its
// kernels read or write (operands, outputs, workspace) until the main stream has waited for the
// piece (retire(), join()). That wait is what makes releasing them safe: the caching allocator
// hands a freed block to the next request at once, relying on the main stream's order, so a
// block a side kernel still uses must not be freed before the main stream is ordered after
// that kernel. During a graph capture the same calls record the fork and the join as edges of
// the captured graph, so replays run both branches concurrently too.
//
// Each thread has its own side stream per device, created at its first use and kept for the
// process, like the main one; everything here is the calling thread's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hourglass/device/gpu/runtime.h"
#include "hourglass/tensor/tensor.h"

namespace hg::gpu {

class SideStream {
 public:
  // The calling thread's side stream of device `index`.
  static SideStream& of(int index);

  // Starts a piece and returns the stream to issue it to.
  gpuStream_t begin();
  // Ends the piece begun last; `keep` stays referenced until the main stream waits for it.
  void end(std::vector<Tensor> keep);
  // Makes the main stream wait for every piece but the `in_flight` newest and releases what
  // those pieces held.
  void retire(size_t in_flight);
  void join() { retire(0); }
  // Pieces ended and not yet waited for.
  size_t pieces() const { return pieces_.size(); }

  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

 private:
  explicit SideStream(int index);
  struct Piece {
    gpuEvent_t done;
    std::vector<Tensor> keep;
  };
  gpuEvent_t take_event();

  int index_;
  gpuStream_t stream_ = nullptr;
  gpuEvent_t forked_ = nullptr;  // the main stream up to the last begin()
  std::vector<Piece> pieces_;    // oldest first
  std::vector<gpuEvent_t> spare_events_;
};

}  // namespace hg::gpu
