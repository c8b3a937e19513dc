// `hourglass train` as two ranks started by Open MPI's mpiexec, as a cluster runs it: a stop
// asked of one rank stops every rank with one checkpoint, a rank killed outright ends the job
// instead of leaving the others waiting, and in both cases `--resume auto` finishes the run with
// the weights of one process that trained the same global batch without interruption.
// Progress is observed through the run directory (checkpoints), never timed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hourglass/tensor/safetensors.h"
#include "support/run_files.h"
#include "support/spawn.h"
#include "support/temp_dir.h"

extern char** environ;

namespace hg {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kBinary = HG_BINARY_DIR "/hourglass";
#ifdef HG_MPIEXEC
const std::string kMpiexec = HG_MPIEXEC;
#else
const std::string kMpiexec;
#endif

#define SKIP_WITHOUT_MPIEXEC() \
  if (kMpiexec.empty()) GTEST_SKIP() << "built without MPI (openmpi-bin libopenmpi-dev)"

using test::read_file;

// A small MLP on synthetic data, 3 epochs of 16 steps, a checkpoint after every step; each
// rank takes 16 rows of every batch of 32 (the same micro-batch the one-process reference uses).
std::string write_config(const std::string& dir) {
  const std::string path = dir + "/run.toml";
  std::ofstream(path) << R"(
name = "mpi"
seed = 7
threads = 1
[model]
name = "mlp"
hidden = [256]
[data]
dataset = "synthetic"
synthetic = { train_size = 512, test_size = 64, height = 8, width = 8, channels = 3, classes = 10 }
augment = true
workers = 0
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
[train]
epochs = 3
batch_size = 32
micro_batch = 16
[checkpoint]
every_steps = 1
keep_last = 2
)";
  return path;
}

struct Job {
  pid_t pid = -1;
  std::string log;
};

// `hourglass ARGS` directly (ranks = 0) or as `ranks` ranks under mpiexec; output to `log`. The
// ranks carry HG_TEST_JOB=<tag> in their environment, so rank_pid() can find them.
Job start(int ranks, const std::vector<std::string>& args, const std::string& log,
          const std::string& tag) {
  std::vector<std::string> argv_s;
  if (ranks > 0)
    argv_s = {
        kMpiexec, "-n",         std::to_string(ranks), "--oversubscribe", "--allow-run-as-root",
        "-x",     "HG_TEST_JOB"};
  argv_s.push_back(kBinary);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  ::setenv("HG_TEST_JOB", tag.c_str(), 1);
  test::without_leak_checks_in_children();  // the ranks initialise MPI
  // Local ranks need no ssh agent; containers may refuse cross-process memory copies.
  ::setenv("OMPI_MCA_plm_rsh_agent", "", 1);
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  return Job{test::spawn_logged(argv_s, log), log};
}

// The exit code once the job ends within `seconds` (-1: ended by a signal), else nullopt.
std::optional<int> wait_exit(const Job& job, double seconds) {
  const std::optional<int> status = test::wait_status(job.pid, seconds);
  if (!status) return std::nullopt;
  return test::exit_code(*status);
}

// Runs to the end (at most 5 minutes) and returns the exit code.
int run_to_end(int ranks, const std::vector<std::string>& args, const std::string& log) {
  Job job = start(ranks, args, log, "run-to-end");
  std::optional<int> code = wait_exit(job, 300);
  if (!code) {
    ::kill(job.pid, SIGKILL);
    ::waitpid(job.pid, nullptr, 0);
    ADD_FAILURE() << "the job did not end in 5 minutes: " << read_file(log);
    return -2;
  }
  return *code;
}

// The pid of rank `rank` of the job tagged `tag` (0 while it is not found).
pid_t rank_pid(const std::string& tag, int rank) {
  const std::string want_tag = "HG_TEST_JOB=" + tag;
  const std::string want_rank = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string env = read_file(e.path().string() + "/environ");
    bool has_tag = false, has_rank = false;
    for (size_t at = 0; at < env.size();) {
      const size_t end = env.find('\0', at);
      const std::string var = env.substr(at, end == std::string::npos ? end : end - at);
      has_tag = has_tag || var == want_tag;
      has_rank = has_rank || var == want_rank;
      if (end == std::string::npos) break;
      at = end + 1;
    }
    const std::string exe = fs::read_symlink(e.path() / "exe", ec).filename().string();
    if (has_tag && has_rank && exe == "hourglass") return pid_t(std::stol(name));
  }
  return 0;
}

int64_t last_step(const std::string& run_dir) { return test::last_checkpoint_step(run_dir); }

// Waits until the job has checkpointed step `step` (true) or ended (false).
bool wait_for_step(const Job& job, const std::string& run_dir, int64_t step) {
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (Clock::now() < deadline) {
    if (last_step(run_dir) >= step) return true;
    if (::waitpid(job.pid, nullptr, WNOHANG) == job.pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ADD_FAILURE() << "no checkpoint of step " << step << " in 5 minutes";
  return false;
}

// The model tensors of final.safetensors, bit for bit.
void expect_same_weights(const std::string& ref_dir, const std::string& dir) {
  test::expect_same_final_tensors(ref_dir, dir);
}

std::vector<std::string> train_args(const std::string& config, const std::string& run_dir,
                                    std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"train", config, "--run-dir", run_dir, "--no-progress"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// One process, the whole batch in two micro-batches of 16: what two ranks must reproduce.
std::string reference(const std::string& dir, const std::string& config) {
  const std::string run = dir + "/ref";
  EXPECT_EQ(run_to_end(0, train_args(config, run), dir + "/ref.log"), 0)
      << read_file(dir + "/ref.log");
  return run;
}

TEST(MpiTrain, ASigtermToOneRankStopsEveryRankWithACheckpointAndTheRunResumes) {
  SKIP_WITHOUT_MPIEXEC();
  const std::string dir = test::fresh_temp_dir("hourglass_mpi_train_sigterm");
  const std::string config = write_config(dir);
  const std::string run = dir + "/run";
  const std::string tag = "sigterm-" + std::to_string(::getpid());
  Job job = start(2, train_args(config, run), dir + "/log.txt", tag);
  ASSERT_TRUE(wait_for_step(job, run, 3)) << read_file(job.log);
  pid_t rank1 = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((rank1 = rank_pid(tag, 1)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(rank1, 0) << "rank 1 not found";
  ASSERT_EQ(::kill(rank1, SIGTERM), 0);
  const std::optional<int> code = wait_exit(job, 300);
  ASSERT_TRUE(code.has_value()) << "the job did not stop: " << read_file(job.log);
  const std::string log = read_file(job.log);
  EXPECT_EQ(*code, 75) << log;  // stopped, resumable
  EXPECT_NE(log.find("stopped (a stop request to another rank)"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(run + "/final.safetensors"));
  const int64_t stopped_at = last_step(run);
  EXPECT_GE(stopped_at, 3);
  EXPECT_EQ(run_to_end(2, train_args(config, run, {"--resume", "auto"}), dir + "/resume.log"), 0)
      << read_file(dir + "/resume.log");
  EXPECT_NE(read_file(dir + "/resume.log").find("resuming from"), std::string::npos);
  // Rank 0 kept the ledger: two sessions (stopped, then finished), each charged for 2 devices.
  const nlohmann::json ledger = nlohmann::json::parse(read_file(run + "/budget.json"));
  ASSERT_EQ(ledger["sessions"].size(), 2u) << ledger.dump();
  for (const auto& session : ledger["sessions"]) {
    EXPECT_EQ(session["devices"], 2);
    EXPECT_NEAR(session["device_seconds"].get<double>(), 2 * session["wall_seconds"].get<double>(),
                1e-9);
  }
  EXPECT_EQ(ledger["sessions"][0]["stop_reason"], "a stop request to another rank");
  expect_same_weights(reference(dir, config), run);
}

TEST(MpiTrain, AKilledRankEndsTheJobAndTheRunResumesFromItsLastCheckpoint) {
  SKIP_WITHOUT_MPIEXEC();
  const std::string dir = test::fresh_temp_dir("hourglass_mpi_train_kill");
  const std::string config = write_config(dir);
  const std::string run = dir + "/run";
  const std::string tag = "kill-" + std::to_string(::getpid());
  Job job = start(2, train_args(config, run), dir + "/log.txt", tag);
  ASSERT_TRUE(wait_for_step(job, run, 5)) << read_file(job.log);
  pid_t rank1 = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((rank1 = rank_pid(tag, 1)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(rank1, 0) << "rank 1 not found";
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  // The survivor would wait forever in the next all-reduce; mpiexec ends it instead.
  const std::optional<int> code = wait_exit(job, 120);
  ASSERT_TRUE(code.has_value()) << "rank 0 was left running: " << read_file(job.log);
  EXPECT_NE(*code, 0);
  EXPECT_FALSE(fs::exists(run + "/final.safetensors"));
  EXPECT_EQ(run_to_end(2, train_args(config, run, {"--resume", "auto"}), dir + "/resume.log"), 0)
      << read_file(dir + "/resume.log");
  expect_same_weights(reference(dir, config), run);
}

}  // namespace
}  // namespace hg
