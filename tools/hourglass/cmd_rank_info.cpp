// hourglass rank-info (hidden; for tests of `hourglass launch` and of launchers): prints the
// launch environment this process reads (device/launch_env.h) on stdout, one line on stderr,
// and with --dir writes it to DIR/rank-<rank>. With --wait-for-signal it then waits for
// SIGINT, SIGTERM or SIGUSR1 and writes the signal's name to DIR/rank-<rank>.signal before
// exiting 0 (--ignore-sigterm: a SIGTERM is written and waited past). --fail-rank R makes rank
// R exit with --exit-code once every rank's file is in DIR, so that the failure finds every
// other rank waiting.
#include <signal.h>

#include <fmt/format.h>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "commands.h"
#include "hourglass/base/error.h"
#include "hourglass/dist/launch_env.h"

namespace hg::cli {

namespace {

namespace fs = std::filesystem;

struct RankInfoArgs {
  std::string dir;
  bool wait_for_signal = false;
  bool ignore_sigterm = false;
  int fail_rank = -1;
  int exit_code = 1;
};

// Written under a temporary name and renamed, so that a reader never sees a partial file.
void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp) << text << "\n";
  fs::rename(tmp, path);
}

int run_rank_info(const RankInfoArgs& a) {
  const LaunchEnv env = read_launch_env();
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  const std::string line =
      fmt::format("rank={} local_rank={} world_size={} master={}:{} source={} nccl_nvls_enable={}",
                  env.rank, env.local_rank, env.world_size, env.master_addr, env.master_port,
                  launch_source_name(env.source), nvls ? nvls : "unset");
  fmt::print("{}\n", line);
  std::fflush(stdout);
  fmt::print(stderr, "rank-info: rank {} on stderr\n", env.rank);
  sigset_t waited;
  sigemptyset(&waited);
  for (int signo : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&waited, signo);
  // Blocked before the file says this rank is ready: a signal sent after that is waited for.
  if (a.wait_for_signal) ::sigprocmask(SIG_BLOCK, &waited, nullptr);
  const fs::path dir(a.dir);
  if (!a.dir.empty()) {
    fs::create_directories(dir);
    write_file(dir / fmt::format("rank-{}", env.rank), line);
  }
  if (env.rank == a.fail_rank) {
    HG_CHECK(!a.dir.empty(), "rank-info: --fail-rank needs --dir");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (true) {
      int present = 0;
      for (int r = 0; r < env.world_size; ++r)
        present += fs::exists(dir / fmt::format("rank-{}", r)) ? 1 : 0;
      if (present == env.world_size || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    fmt::print(stderr, "rank-info: rank {} fails with exit code {}\n", env.rank, a.exit_code);
    return a.exit_code;
  }
  if (!a.wait_for_signal) return 0;
  while (true) {
    int signo = 0;
    if (::sigwait(&waited, &signo) != 0) continue;
    const std::string name = signo == SIGINT ? "SIGINT" : signo == SIGTERM ? "SIGTERM" : "SIGUSR1";
    if (!a.dir.empty()) write_file(dir / fmt::format("rank-{}.signal", env.rank), name);
    fmt::print(stderr, "rank-info: rank {} got {}\n", env.rank, name);
    if (!(signo == SIGTERM && a.ignore_sigterm)) return 0;
  }
}

}  // namespace

Runner add_rank_info(CLI::App& app) {
  auto a = std::make_shared<RankInfoArgs>();
  CLI::App* sub = app.add_subcommand("rank-info", "print the launch environment (for tests)");
  sub->group("");  // hidden from --help
  sub->add_option("--dir", a->dir, "write rank-<rank> (and rank-<rank>.signal) here");
  sub->add_flag("--wait-for-signal", a->wait_for_signal,
                "wait for SIGINT, SIGTERM or SIGUSR1, then exit 0");
  sub->add_flag("--ignore-sigterm", a->ignore_sigterm, "keep waiting after a SIGTERM");
  sub->add_option("--fail-rank", a->fail_rank, "this rank exits with --exit-code");
  sub->add_option("--exit-code", a->exit_code, "exit code of --fail-rank")
      ->check(CLI::Range(0, 255));
  return [a] { return run_rank_info(*a); };
}

}  // namespace hg::cli
