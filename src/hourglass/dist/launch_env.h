// Where this process stands in a multi-process job: its rank, its rank on this host, the number
// of processes, and the address of rank 0's rendezvous, read from the environment variables
// that launchers set.
//
// Precedence, first match wins (a set is "present" when any of its variables is set):
// 1. torchrun (and `hourglass launch`): RANK, LOCAL_RANK, WORLD_SIZE;
// 2. Open MPI's mpirun: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE;
// 3. Slurm's srun: SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS.
// The innermost launcher wins: torchrun started by srun, or mpirun inside a Slurm allocation,
// sets its own variables while the outer ones stay in the environment. A present set must be
// complete. MASTER_ADDR and MASTER_PORT (rank 0's rendezvous, used by backends that need one)
// are read with any set and must come together. With no set present the process runs alone:
// rank 0 of 1. (A Slurm batch script itself sees SLURM_PROCID=0 and the allocation's
// SLURM_NTASKS: start hourglass with srun there, not directly.)
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace hg {

enum class LaunchSource : uint8_t { SingleProcess, Torchrun, OpenMpi, Slurm };

// "single process", "torchrun", "Open MPI", "Slurm".
const char* launch_source_name(LaunchSource source);

struct LaunchEnv {
  LaunchSource source = LaunchSource::SingleProcess;
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string master_addr;  // "" when MASTER_ADDR is not set
  int master_port = 0;      // 0 when MASTER_PORT is not set

  bool is_distributed() const { return world_size > 1; }
  // "rank 1 of 4 (local rank 1, torchrun, master 127.0.0.1:29500)".
  std::string str() const;
};

// Returns the value of an environment variable, or nullptr when it is not set.
using EnvLookup = std::function<const char*(const char* name)>;

// Reads the launch environment through `lookup`. Throws InvalidInput naming the variable, its
// value and the fix for: a value that is not a whole number, a negative one, a rank or local
// rank not below the world size, a world size below 1, a port outside 1..65535, an empty
// MASTER_ADDR, and an incomplete set (RANK without WORLD_SIZE, MASTER_ADDR without
// MASTER_PORT, ...).
LaunchEnv parse_launch_env(const EnvLookup& lookup);
// The same, from this process's environment (getenv).
LaunchEnv read_launch_env();

}  // namespace hg
