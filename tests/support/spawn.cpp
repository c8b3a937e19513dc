#include "support/spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace hg::test {

pid_t spawn_logged(const std::vector<std::string>& argv_in, const std::string& log,
                   const SpawnOptions& options) {
  std::vector<std::string> argv_s = argv_in;
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | (options.truncate_log ? O_TRUNC : O_APPEND),
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (!options.blocked_signals.empty()) {
    sigset_t mask;
    sigemptyset(&mask);
    for (int signo : options.blocked_signals) sigaddset(&mask, signo);
    posix_spawnattr_setsigmask(&attr, &mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv_s[0].c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << "cannot start " << argv_s[0] << ": " << std::strerror(rc);
  return rc == 0 ? pid : -1;
}

std::optional<int> wait_status(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

}  // namespace hg::test

namespace hg::test {

void without_leak_checks_in_children() {
  const char* now = std::getenv("ASAN_OPTIONS");
  std::string options = now != nullptr && *now != '\0' ? std::string(now) + ":" : std::string();
  ::setenv("ASAN_OPTIONS", (options + "detect_leaks=0").c_str(), 1);
}

}  // namespace hg::test
