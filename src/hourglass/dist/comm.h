// Collective communication between the ranks of a job: the interface the data-parallel
// trainer calls, over raw buffers of the memory the backend reaches (host memory for MPI, GPU
// memory for NCCL). Public methods check their arguments once and call the backend's
// implementation; every rank must call the same collectives in the same order with the same
// counts, or the job hangs (the backends cannot detect it).
//
// Backends: a single-process communicator (size 1, no library: the null backend that lets a
// plain run take the same code path), Open MPI for CPU runs (comm_mpi.cpp, built when CMake
// finds MPI) and NCCL for GPU runs (gpu/comm_nccl.cpp: NCCL in CUDA builds, RCCL in HIP builds,
// where CMake finds it).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "hourglass/base/dtype.h"
#include "hourglass/dist/launch_env.h"

namespace hg {

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "single process", "mpi", ...
  virtual const char* backend_name() const = 0;

  // In place: every rank's `count` elements of `dtype` at `data` become the sum over ranks.
  // Throws InvalidInput for a dtype the backend does not reduce (supports_all_reduce).
  void all_reduce_sum(void* data, size_t count, DType dtype);
  virtual bool supports_all_reduce(DType dtype) const = 0;
  // The same sum, started here and possibly still running when this returns, so that it
  // overlaps the work issued after it (gradient buckets during backward). all_reduce_wait()
  // orders everything after it behind every sum started before it. A GPU backend runs the
  // sums on a stream of its own, each after the work already issued to the device's stream,
  // and all_reduce_wait makes the device's stream wait for them (the host does not wait);
  // host backends finish each sum before returning. `data` must stay untouched until then.
  void all_reduce_sum_start(void* data, size_t count, DType dtype);
  void all_reduce_wait();
  // Whether the collectives take device buffers (true: GPU memory of the communicator's
  // device, ordered on its stream) or host memory.
  virtual bool takes_device_buffers() const { return false; }
  // Rank `root`'s `bytes` at `data` are copied into every rank's `data`.
  void broadcast(void* data, size_t bytes, int root);
  // Every rank's `bytes_per_rank` at `send` land at recv + rank * bytes_per_rank on every rank;
  // `recv` holds size() * bytes_per_rank bytes and does not overlap `send`.
  void all_gather(const void* send, void* recv, size_t bytes_per_rank);
  // Returns once every rank has called it.
  void barrier();

 protected:
  Communicator(int rank, int size) : rank_(rank), size_(size) {}
  virtual void all_reduce_sum_impl(void* data, size_t count, DType dtype) = 0;
  virtual void all_reduce_start_impl(void* data, size_t count, DType dtype) {
    all_reduce_sum_impl(data, count, dtype);
  }
  virtual void all_reduce_wait_impl() {}
  virtual void broadcast_impl(void* data, size_t bytes, int root) = 0;
  virtual void all_gather_impl(const void* send, void* recv, size_t bytes_per_rank) = 0;
  virtual void barrier_impl() = 0;

 private:
  int rank_;
  int size_;
};

// Rank 0 of 1: all_reduce leaves the data, broadcast checks root 0, all_gather copies.
std::unique_ptr<Communicator> make_single_process_communicator();

// Whether this build has the MPI communicator.
bool mpi_available();
// Initialises MPI once per process (MPI_Init_thread; finalised at exit) and returns a
// communicator over a copy of MPI_COMM_WORLD: started by mpirun, its ranks; started alone,
// rank 0 of 1. Throws InvalidInput saying how to install Open MPI in a build without it, and a
// Runtime error naming the MPI call when MPI fails.
std::unique_ptr<Communicator> make_mpi_communicator();

// Whether this build has the NCCL communicator (NCCL on NVIDIA, RCCL on AMD).
bool nccl_available();
// The library behind it and the version loaded at run time ("NCCL 2.28.9", "RCCL 2.26.6"), for
// `hourglass doctor`; "" in a build without one. Throws Runtime when the library's version
// call fails.
std::string nccl_library_version();
// The NCCL communicator of rank env.rank of env.world_size over buffers on GPU `device`. Its
// collectives are issued to that device's stream (gpu::stream): asynchronous to the host and
// ordered with the ops there; barrier() also waits for the stream. Rank 0's unique id reaches
// the other ranks through MPI when Open MPI started them and this build has MPI, else through
// the TCP rendezvous at MASTER_ADDR:MASTER_PORT (rendezvous.h) within `rendezvous_timeout`.
// Throws InvalidInput in a build without NCCL (saying how to get one) or for a device that is
// not there, and Runtime naming the NCCL call that failed.
std::unique_ptr<Communicator> make_nccl_communicator(
    const LaunchEnv& env, int device,
    std::chrono::milliseconds rendezvous_timeout = std::chrono::minutes(5));

}  // namespace hg
