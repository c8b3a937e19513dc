// hourglass launch: each rank's environment, the rank-prefixed output, a port in use refused,
// a failing rank stopping the others (SIGKILL for one that ignores SIGTERM), and SIGINT,
// SIGTERM and SIGUSR1 forwarded to every rank. The ranks run the hidden `rank-info`
// subcommand; signals are sent once every rank has written its file (it blocks the signals
// first), never after a fixed delay.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/run_binary.h"
#include "support/spawn.h"
#include "support/temp_dir.h"

extern char** environ;

namespace hg {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::run_hourglass;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A socket listening on a port the kernel picked; closed when it goes out of scope.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd, 1), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Listener() { ::close(fd); }
};

// A port that was free a moment ago (the kernel's pick, released).
int free_port() { return Listener().port; }

std::string launch(int nproc, const std::string& rank_args) {
  return "launch --nproc " + std::to_string(nproc) + " --master-port " +
         std::to_string(free_port()) + " -- rank-info " + rank_args;
}

TEST(Launch, EveryRankGetsItsEnvironmentAndPrefixedOutput) {
  const int port = free_port();
  const test::RunResult r =
      run_hourglass("launch --nproc 3 --master-port " + std::to_string(port) + " -- rank-info");
  ASSERT_EQ(r.code, 0) << r.output;
  for (int i = 0; i < 3; ++i) {
    const std::string env = "[rank " + std::to_string(i) + "] rank=" + std::to_string(i) +
                            " local_rank=" + std::to_string(i) +
                            " world_size=3 master=127.0.0.1:" + std::to_string(port) +
                            " source=torchrun nccl_nvls_enable=0\n";
    EXPECT_TRUE(contains(r.output, env)) << env << " not in:\n" << r.output;
    const std::string err =
        "[rank " + std::to_string(i) + "] rank-info: rank " + std::to_string(i) + " on stderr\n";
    EXPECT_TRUE(contains(r.output, err)) << err << " not in:\n" << r.output;
  }
}

TEST(Launch, RefusesAPortInUse) {
  Listener busy;
  const test::RunResult r = run_hourglass("launch --nproc 2 --master-port " +
                                          std::to_string(busy.port) + " -- rank-info");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "--master-port " + std::to_string(busy.port))) << r.output;
  EXPECT_TRUE(contains(r.output, "already in use")) << r.output;
  EXPECT_FALSE(contains(r.output, "[rank")) << "no rank may start: " << r.output;
}

TEST(Launch, BadUsage) {
  EXPECT_EQ(run_hourglass("launch --nproc 0 -- rank-info").code, 2);
  EXPECT_EQ(run_hourglass("launch --nproc 2").code, 2);
  const test::RunResult nested = run_hourglass("launch --nproc 2 -- launch --nproc 2 -- info");
  EXPECT_EQ(nested.code, 2) << nested.output;
  EXPECT_TRUE(contains(nested.output, "itself `launch`")) << nested.output;
  // A rank's own bad input is the launch's exit code.
  const test::RunResult bad = run_hourglass(launch(2, "--exit-code 999"));
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "rank 0 exited with code 2") ||
              contains(bad.output, "rank 1 exited with code 2"))
      << bad.output;
}

// CPU ranks reduce through MPI: ranks that `launch` (not mpirun) started are refused with the
// command that works, before anything is written.
TEST(Launch, CpuTrainingRanksNeedMpirun) {
  const std::string dir = test::fresh_temp_dir("hourglass_launch_cpu_train");
  const std::string config = dir + "/cpu.toml";
  {
    std::ofstream f(config);
    f << "device = \"cpu\"\n[data]\ndataset = \"synthetic\"\n";
  }
  test::without_leak_checks_in_children();  // the ranks initialise MPI
  const test::RunResult r =
      run_hourglass("launch --nproc 2 --master-port " + std::to_string(free_port()) + " -- train " +
                    config + " --run-dir " + dir + "/run");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "CPU ranks communicate through MPI")) << r.output;
  EXPECT_TRUE(contains(r.output, "mpirun -np 2")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/run")) << r.output;
}

// Rank 1 fails once every rank is waiting: the others get SIGTERM, the launch exits with rank
// 1's code and names it.
TEST(Launch, AFailingRankStopsTheOthers) {
  const std::string dir = test::fresh_temp_dir("hourglass_launch_fail");
  const test::RunResult r =
      run_hourglass(launch(3, "--dir " + dir + " --wait-for-signal --fail-rank 1 --exit-code 3"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 1 exited with code 3: stopping the other 2 ranks"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "failed: rank 1 exited with code 3")) << r.output;
  EXPECT_EQ(read_file(dir + "/rank-0.signal"), "SIGTERM\n") << r.output;
  EXPECT_EQ(read_file(dir + "/rank-2.signal"), "SIGTERM\n") << r.output;
  EXPECT_FALSE(fs::exists(dir + "/rank-1.signal"));
}

// A rank that outlives SIGTERM is killed --grace seconds later (a bound, not a synchronisation:
// the test passes for any delay).
TEST(Launch, ARankIgnoringSigtermIsKilled) {
  const std::string dir = test::fresh_temp_dir("hourglass_launch_kill");
  const test::RunResult r =
      run_hourglass("launch --grace 0.5 --nproc 2 --master-port " + std::to_string(free_port()) +
                    " -- rank-info --dir " + dir +
                    " --wait-for-signal --ignore-sigterm --fail-rank 1 --exit-code 4");
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 still runs 0.5 s after SIGTERM: sending SIGKILL"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "rank 0 was ended by SIGKILL")) << r.output;
  EXPECT_EQ(read_file(dir + "/rank-0.signal"), "SIGTERM\n");
}

// Starts `hourglass ARGS` with its output in `log` (emptied first); returns its process id.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {HG_BINARY_DIR "/hourglass"};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::spawn_logged(argv, log, {.truncate_log = true});
}

std::optional<int> wait_for(pid_t pid, double seconds) { return test::wait_status(pid, seconds); }

TEST(Launch, ForwardsSignalsToEveryRank) {
  for (const auto& [signo, name] : {std::pair{SIGUSR1, "SIGUSR1"}, std::pair{SIGTERM, "SIGTERM"},
                                    std::pair{SIGINT, "SIGINT"}}) {
    const std::string dir = test::fresh_temp_dir(std::string("hourglass_launch_") + name);
    const std::string log = dir + "/launch.log";
    const pid_t pid = spawn({"launch", "--nproc", "3", "--master-port", std::to_string(free_port()),
                             "--", "rank-info", "--dir", dir + "/ranks", "--wait-for-signal"},
                            log);
    // Every rank has blocked the signals and written its file.
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    std::optional<int> status;
    while (!(status = wait_for(pid, 0))) {
      if (fs::exists(dir + "/ranks/rank-0") && fs::exists(dir + "/ranks/rank-1") &&
          fs::exists(dir + "/ranks/rank-2"))
        break;
      ASSERT_LT(Clock::now(), deadline) << "ranks did not start: " << read_file(log);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_FALSE(status) << "launch ended before the signal: " << read_file(log);
    ::kill(pid, signo);
    status = wait_for(pid, 120);
    if (!status) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      FAIL() << name << ": launch did not end: " << read_file(log);
    }
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << name << ": " << read_file(log);
    EXPECT_TRUE(contains(read_file(log), std::string(name) + ": sending it to 3 running ranks"))
        << read_file(log);
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(read_file(dir + "/ranks/rank-" + std::to_string(r) + ".signal"),
                std::string(name) + "\n")
          << "rank " << r << ": " << read_file(log);
  }
}

}  // namespace
}  // namespace hg
