#include "hourglass/dist/launch_env.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "hourglass/base/environment.h"
#include "hourglass/base/error.h"

namespace hg {

namespace {

// One launcher's three variables, in the order rank, local rank, world size.
struct VariableSet {
  LaunchSource source;
  const char* rank;
  const char* local_rank;
  const char* world_size;
};

constexpr VariableSet kSets[] = {
    {LaunchSource::Torchrun, "RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {LaunchSource::OpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_SIZE"},
    {LaunchSource::Slurm, "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

const std::string kSingleRemedy = "or unset them all to run as a single process";

// The whole text of variable `name` as a decimal integer in [min, max]; `remedy` says how to
// fix a bad value.
int parse_int(const char* name, const char* text, long long min, long long max,
              const std::string& remedy) {
  const std::string_view s(text);
  long long value = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, value);
  if (s.empty() || ptr != end || ec == std::errc::invalid_argument) {
    throw_invalid(fmt::format("{}='{}' is not a whole number", name, s), remedy);
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    if (value < 0 && ec != std::errc::result_out_of_range) {
      throw_invalid(fmt::format("{}={} is negative", name, s), remedy);
    }
    throw_invalid(fmt::format("{}={} is outside {}..{}", name, s, min, max), remedy);
  }
  return int(value);
}

}  // namespace

const char* launch_source_name(LaunchSource source) {
  switch (source) {
    case LaunchSource::SingleProcess: return "single process";
    case LaunchSource::Torchrun: return "torchrun";
    case LaunchSource::OpenMpi: return "Open MPI";
    case LaunchSource::Slurm: return "Slurm";
  }
  return "?";
}

std::string LaunchEnv::str() const {
  std::string master = master_addr.empty() ? std::string("no MASTER_ADDR")
                                           : fmt::format("master {}:{}", master_addr, master_port);
  return fmt::format("rank {} of {} (local rank {}, {}, {})", rank, world_size, local_rank,
                     launch_source_name(source), master);
}

LaunchEnv parse_launch_env(const EnvLookup& lookup) {
  LaunchEnv env;
  for (const VariableSet& set : kSets) {
    const char* rank = lookup(set.rank);
    const char* local_rank = lookup(set.local_rank);
    const char* world_size = lookup(set.world_size);
    if (!rank && !local_rank && !world_size) continue;
    const std::string all = fmt::format("{}, {} and {}", set.rank, set.local_rank, set.world_size);
    // Every variable of the set, before any value is read.
    for (const auto& [name, value] :
         {std::pair{set.rank, rank}, std::pair{set.local_rank, local_rank},
          std::pair{set.world_size, world_size}}) {
      if (value) continue;
      const char* present = rank ? set.rank : local_rank ? set.local_rank : set.world_size;
      throw_invalid(
          fmt::format("{} is set ({}='{}') but {} is not: {}'s launch variables come together",
                      present, present, lookup(present), name, launch_source_name(set.source)),
          fmt::format("set all of {} (the launcher does), {}", all, kSingleRemedy));
    }
    const std::string remedy = fmt::format(
        "set {} to the number of processes, {} to 0..{}-1 and {} to the "
        "process's index on its host, {}",
        set.world_size, set.rank, set.world_size, set.local_rank, kSingleRemedy);
    env.source = set.source;
    env.world_size = parse_int(set.world_size, world_size, 1, 1 << 24, remedy);
    env.rank = parse_int(set.rank, rank, 0, 1 << 24, remedy);
    env.local_rank = parse_int(set.local_rank, local_rank, 0, 1 << 24, remedy);
    if (env.rank >= env.world_size) {
      throw_invalid(fmt::format("{}={} is not below {}={}: ranks are 0..{}", set.rank, rank,
                                set.world_size, world_size, env.world_size - 1),
                    remedy);
    }
    if (env.local_rank >= env.world_size) {
      throw_invalid(fmt::format("{}={} is not below {}={}: local ranks are 0..{}", set.local_rank,
                                local_rank, set.world_size, world_size, env.world_size - 1),
                    remedy);
    }
    break;
  }
  const char* addr = lookup("MASTER_ADDR");
  const char* port = lookup("MASTER_PORT");
  const std::string master_remedy =
      "set MASTER_ADDR to rank 0's host name or address and MASTER_PORT to a free port "
      "(1..65535) on it, the same on every rank, or unset both";
  if (addr && !port) {
    throw_invalid(fmt::format("MASTER_ADDR is set ('{}') but MASTER_PORT is not", addr),
                  master_remedy);
  }
  if (port && !addr) {
    throw_invalid(fmt::format("MASTER_PORT is set ('{}') but MASTER_ADDR is not", port),
                  master_remedy);
  }
  if (addr) {
    if (*addr == '\0') throw_invalid("MASTER_ADDR is set but empty", master_remedy);
    env.master_addr = addr;
    env.master_port = parse_int("MASTER_PORT", port, 1, 65535, master_remedy);
  }
  return env;
}

LaunchEnv read_launch_env() {
  return parse_launch_env([](const char* name) { return env::get(name); });
}

}  // namespace hg
