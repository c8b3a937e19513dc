#include "support/run_binary.h"

#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace hg::test {

namespace {

std::string binary() { return HG_BINARY_DIR "/hourglass"; }

// Runs `cmd` through the shell; its stdout, and the exit code.
RunResult run_shell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {-1, "popen failed for: " + cmd};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

RunResult run_hourglass(const std::string& args) {
  return run_shell(binary() + " " + args + " 2>&1");
}

SplitRunResult run_hourglass_split(const std::string& args, const std::string& env) {
  // stderr into a file of this process's own, read back after the command ended.
  const std::string err_path = (std::filesystem::temp_directory_path() /
                                ("hourglass_test_stderr_" + std::to_string(::getpid())))
                                   .string();
  const RunResult r = run_shell(env + " " + binary() + " " + args + " 2>" + err_path);
  std::ifstream in(err_path);
  std::string err{std::istreambuf_iterator<char>(in), {}};
  std::filesystem::remove(err_path);
  return {r.code, r.output, std::move(err)};
}

RunResult run_hourglass_on_terminal(const std::string& args, const std::string& env) {
  const std::string cmd = env + " " + binary() + " " + args;
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return {-1, "forkpty failed"};
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string out;
  std::array<char, 4096> buf;
  while (true) {
    const ssize_t n = ::read(master, buf.data(), buf.size());
    if (n > 0) {
      out.append(buf.data(), size_t(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO once the child side is closed
    }
  }
  ::close(master);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace hg::test
