// Data parallelism: the ranks of a job each train on their part of every batch (the loader's
// shard) and sum their gradients before the update, so every rank takes the same step as one
// process on the whole batch would.
//
// - Gradients: the TrainStep reports buckets of the flat gradient arena as backward produces
//   them (gradient_buckets.h); each is summed over the ranks in place as soon as it is ready
//   (Communicator::all_reduce_sum_start: on a GPU, on the communicator's own stream, overlapping
//   the rest of backward), and the update waits for the last one. Each rank weights its rows'
//   losses by 1 / (the global batch's rows) (TrainStep::run's global_rows), so the sum is the
//   whole batch's gradient. An fp16 overflow on one rank reaches every rank's sum, so every
//   rank skips that step.
// - Parameters: broadcast from rank 0 before the first step, so the ranks start equal whatever
//   they loaded; from then on equal updates keep them equal.
// - Batch-norm running statistics: local to each rank during an epoch (each normalises its own
//   rows); averaged over the ranks before evaluation and checkpoints (sync_buffers).
// - Decisions (stop, checkpoint, early stopping) are rank 0's, sent to the others: agree().
//
// Every method is a collective: all ranks call it in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/dist/comm.h"
#include "hourglass/dist/launch_env.h"
#include "hourglass/nn/flat_parameters.h"
#include "hourglass/train/step/train_step.h"

namespace hg::train {

// The communicator of this process as rank env.rank of env.world_size training on `device`,
// which it points at this rank's GPU: NCCL (RCCL) for a GPU, one GPU per rank (the local rank's,
// or the only one a launcher left visible); Open MPI for the CPU, in which case the process must
// have been started by mpirun (or srun with MPI support): InvalidInput naming that otherwise.
std::unique_ptr<Communicator> connect_ranks(const LaunchEnv& env, Device& device);

class DataParallel {
 public:
  // `comm` (outliving this) reaches the memory of `device`: a GPU communicator for a GPU run, a
  // host one for a CPU run (InvalidInput otherwise, saying which to use).
  DataParallel(Communicator& comm, Device device, int64_t bucket_bytes);

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  Communicator& communicator() { return comm_; }

  // Makes `step` report gradient buckets and sum each over the ranks.
  void attach(TrainStep& step);
  // Rank 0's parameters and buffers on every rank.
  void broadcast_parameters(const FlatParameters& flat);
  // Every rank's f32 buffers (batch-norm running statistics) become their mean over the ranks.
  void sync_buffers(const Tensor& buffers);
  // `values` (host numbers) summed over the ranks, in place.
  void sum(std::vector<double>& values);
  // Rank 0's `values` on every rank (sizes must match).
  void broadcast(std::vector<double>& values);
  // Rank 0's text on every rank.
  std::string broadcast(const std::string& text);

 private:
  // Runs `fn` on a buffer of `count` doubles the communicator can reach, filled from and
  // copied back to `values`.
  template <class Fn>
  void through_buffer(std::vector<double>& values, Fn&& fn);

  Communicator& comm_;
  Device device_;
  int64_t bucket_bytes_;
};

}  // namespace hg::train
