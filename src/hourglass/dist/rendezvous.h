// A small TCP rendezvous: rank 0 hands every rank the same bytes (NCCL's unique id) through a
// socket at MASTER_ADDR:MASTER_PORT, for jobs that are not started by mpirun (torchrun,
// `hourglass launch`, srun). Rank 0 listens on the port (all interfaces), waits for the other
// world_size - 1 ranks to connect and say who they are, and sends each the payload; the other
// ranks connect (retrying until rank 0 listens) and read it. Everything is bounded by one
// timeout; a failure names the address, the ranks that did not arrive and what to check.
//
// Protocol, all integers little-endian u32: a rank sends "HGRV", its rank and the world size;
// rank 0 checks them (a rank in range, not seen before, the same world size) and answers with
// the payload's length and bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hg {

struct RendezvousOptions {
  std::string master_addr;  // host name or address of rank 0
  int master_port = 0;
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// On rank 0: sends `payload` to every other rank and returns it. On every other rank: returns
// rank 0's payload (`payload` is ignored). Throws InvalidInput for a port rank 0 cannot listen on
// (in use) or an address that does not resolve, and Runtime for a timeout (naming the ranks
// that did not arrive, or the address that did not answer) or a peer that breaks the protocol.
std::vector<uint8_t> rendezvous_broadcast(const RendezvousOptions& options,
                                          const std::vector<uint8_t>& payload);

}  // namespace hg
