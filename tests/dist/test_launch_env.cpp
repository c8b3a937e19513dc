// The launch environment: each launcher's variables, their precedence, the single-process
// default, and an error naming the variable, its value and the fix for every malformed set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "hourglass/dist/launch_env.h"
#include "support/expect_error.h"

namespace hg {
namespace {

using Vars = std::map<std::string, std::string>;

LaunchEnv parse(const Vars& vars) {
  return parse_launch_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

void expect_invalid(const Vars& vars, const std::vector<std::string>& parts) {
  test::expect_invalid([&] { parse(vars); }, parts);
}

TEST(LaunchEnv, NothingSetIsOneProcess) {
  const LaunchEnv env = parse({});
  EXPECT_EQ(env.source, LaunchSource::SingleProcess);
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_FALSE(env.is_distributed());
  EXPECT_EQ(env.master_addr, "");
  EXPECT_EQ(env.master_port, 0);
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv env = parse({{"RANK", "5"},
                               {"LOCAL_RANK", "1"},
                               {"WORLD_SIZE", "8"},
                               {"MASTER_ADDR", "node0"},
                               {"MASTER_PORT", "29500"}});
  EXPECT_EQ(env.source, LaunchSource::Torchrun);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_TRUE(env.is_distributed());
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.str(), "rank 5 of 8 (local rank 1, torchrun, master node0:29500)");
}

TEST(LaunchEnv, OpenMpiAndSlurm) {
  LaunchEnv env = parse({{"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(env.source, LaunchSource::OpenMpi);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.master_addr, "");
  env = parse({{"SLURM_PROCID", "2"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS", "3"}});
  EXPECT_EQ(env.source, LaunchSource::Slurm);
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.world_size, 3);
}

// torchrun over Open MPI over Slurm: the innermost launcher's variables win, and the outer
// ones are not checked.
TEST(LaunchEnv, Precedence) {
  const Vars slurm = {{"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "2"}};
  Vars mpi = slurm;
  mpi.insert({{"OMPI_COMM_WORLD_RANK", "3"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
              {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(parse(mpi).source, LaunchSource::OpenMpi);
  EXPECT_EQ(parse(mpi).rank, 3);
  Vars torchrun = mpi;
  torchrun.insert({{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(parse(torchrun).source, LaunchSource::Torchrun);
  EXPECT_EQ(parse(torchrun).world_size, 1);
  // A broken outer set does not matter under a complete inner one.
  Vars broken_outer = {
      {"SLURM_PROCID", "x"}, {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}};
  EXPECT_EQ(parse(broken_outer).rank, 0);
}

TEST(LaunchEnv, MalformedValuesNameTheVariable) {
  const Vars good = {{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "2"}};
  auto with = [&](const std::string& name, const std::string& value) {
    Vars v = good;
    v[name] = value;
    return v;
  };
  expect_invalid(with("RANK", "one"), {"RANK='one'", "not a whole number", "WORLD_SIZE"});
  expect_invalid(with("RANK", ""), {"RANK=''", "not a whole number"});
  expect_invalid(with("RANK", "1 "), {"RANK='1 '", "not a whole number"});
  expect_invalid(with("RANK", "1.0"), {"RANK='1.0'"});
  expect_invalid(with("RANK", "-1"), {"RANK=-1", "negative", "unset them all"});
  expect_invalid(with("RANK", "2"), {"RANK=2", "not below WORLD_SIZE=2", "0..1"});
  expect_invalid(with("RANK", "99999999999999999999"), {"RANK=99999999999999999999", "outside"});
  expect_invalid(with("LOCAL_RANK", "2"), {"LOCAL_RANK=2", "not below WORLD_SIZE=2"});
  expect_invalid(with("WORLD_SIZE", "0"), {"WORLD_SIZE=0", "outside 1.."});
  expect_invalid(with("WORLD_SIZE", "0x2"), {"WORLD_SIZE='0x2'", "not a whole number"});
  expect_invalid({{"OMPI_COMM_WORLD_RANK", "4"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                  {"OMPI_COMM_WORLD_SIZE", "4"}},
                 {"OMPI_COMM_WORLD_RANK=4", "not below OMPI_COMM_WORLD_SIZE=4"});
  expect_invalid({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "z"}, {"SLURM_NTASKS", "1"}},
                 {"SLURM_LOCALID='z'"});
}

TEST(LaunchEnv, PartialSetsNameWhatIsMissing) {
  expect_invalid({{"RANK", "0"}}, {"RANK is set", "RANK='0'", "LOCAL_RANK is not", "torchrun"});
  expect_invalid({{"RANK", "0"}, {"LOCAL_RANK", "0"}},
                 {"WORLD_SIZE is not", "set all of RANK, LOCAL_RANK and WORLD_SIZE"});
  expect_invalid({{"WORLD_SIZE", "2"}}, {"WORLD_SIZE is set", "RANK is not"});
  expect_invalid({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}},
                 {"OMPI_COMM_WORLD_LOCAL_RANK is not", "Open MPI"});
  expect_invalid({{"SLURM_PROCID", "0"}}, {"SLURM_LOCALID is not", "Slurm"});
}

TEST(LaunchEnv, Master) {
  const Vars ranks = {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}};
  auto with = [&](const Vars& more) {
    Vars v = ranks;
    v.insert(more.begin(), more.end());
    return v;
  };
  EXPECT_EQ(parse(with({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "65535"}})).master_port,
            65535);
  // The master without ranks: still one process, the address kept.
  EXPECT_EQ(parse({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}).master_addr, "h");
  expect_invalid(with({{"MASTER_ADDR", "h"}}), {"MASTER_ADDR is set ('h')", "MASTER_PORT is not"});
  expect_invalid(with({{"MASTER_PORT", "29500"}}), {"MASTER_PORT is set ('29500')"});
  expect_invalid(with({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "0"}}),
                 {"MASTER_PORT=0", "outside 1..65535"});
  expect_invalid(with({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "65536"}}), {"MASTER_PORT=65536"});
  expect_invalid(with({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}}), {"MASTER_PORT='http'"});
  expect_invalid(with({{"MASTER_ADDR", ""}, {"MASTER_PORT", "1"}}),
                 {"MASTER_ADDR is set but empty"});
}

// Sets (or unsets, with nullopt) environment variables and restores them when it goes out of
// scope.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      set(name, value);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) set(name, value);
  }

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

// The real environment: every launcher variable cleared (ctest may itself run under a launcher),
// then a torchrun set, then a malformed one; all restored afterwards.
TEST(LaunchEnv, ReadsTheProcessEnvironment) {
  std::map<std::string, std::optional<std::string>> cleared;
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"})
    cleared[name] = std::nullopt;
  const char* before = std::getenv("RANK");
  const std::string rank_before = before ? before : "<unset>";
  {
    ScopedEnv clear(cleared);
    EXPECT_EQ(read_launch_env().source, LaunchSource::SingleProcess);
    {
      ScopedEnv torchrun({{"RANK", "2"},
                          {"LOCAL_RANK", "0"},
                          {"WORLD_SIZE", "3"},
                          {"MASTER_ADDR", "127.0.0.1"},
                          {"MASTER_PORT", "29511"}});
      const LaunchEnv env = read_launch_env();
      EXPECT_EQ(env.rank, 2);
      EXPECT_EQ(env.world_size, 3);
      EXPECT_EQ(env.master_port, 29511);
    }
    EXPECT_EQ(std::getenv("RANK"), nullptr);
    {
      ScopedEnv bad({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_NTASKS", "-2"}});
      test::expect_invalid([] { read_launch_env(); }, {"SLURM_NTASKS=-2", "negative"});
    }
  }
  const char* after = std::getenv("RANK");
  EXPECT_EQ(after ? after : "<unset>", rank_before);
}

}  // namespace
}  // namespace hg
