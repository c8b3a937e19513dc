// hourglass launch --nproc N [--master-port P] [--grace S] -- SUBCOMMAND ARGS...: runs N
// processes of this hourglass binary on this host, the way torchrun does: process i has
// RANK=LOCAL_RANK=i, WORLD_SIZE=LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1, MASTER_PORT=P and
// NCCL_NVLS_ENABLE=0 in its environment (CUDA_VISIBLE_DEVICES and the rest are passed on as
// they are).
//
// - Output: each line a rank prints is printed by the launcher prefixed "[rank i] ", stdout to
//   stdout and stderr to stderr. The ranks' stdin is /dev/null.
// - Signals: SIGINT, SIGTERM and SIGUSR1 to the launcher are sent on to every running rank.
//   The ranks run in a process group of their own, so a Ctrl-C in the terminal reaches them
//   once, through the launcher. Each rank starts with these signals blocked, which hourglass's
//   main() unblocks once its handlers are installed (stop_signals.h): a signal forwarded while
//   a rank starts is handled, not fatal. A rank whose launcher dies gets SIGTERM.
// - Failure: when a rank exits non-zero or is ended by a signal, the launcher sends SIGTERM to
//   the other ranks, SIGKILL to those still running --grace seconds later, and exits with that
//   rank's exit code (1 when a signal ended it), naming the rank and how it ended. Exit 0 when
//   every rank exits 0.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "hourglass/base/error.h"
#include "hourglass/base/write_fully.h"

extern char** environ;

namespace hg::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct LaunchArgs {
  int nproc = 1;
  int master_port = 29500;
  double grace_seconds = 30;
  std::vector<std::string> command;
};

// The environment variables the launcher sets in every rank's environment; the parent's values
// of these names are not passed on.
const char* const kSetVariables[] = {
    "RANK",        "LOCAL_RANK",  "WORLD_SIZE",      "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "NCCL_NVLS_ENABLE"};

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGUSR1};

std::string signal_text(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signo);
}

// "exited with code 3", "was ended by SIGKILL".
std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was ended by {}", signal_text(WTERMSIG(status)));
  return fmt::format("ended with wait status {}", status);
}

// Writes all of `text` to `fd`, retrying short writes; a failed write (a closed pipe) drops it.
void write_all(int fd, std::string_view text) { (void)write_fully(fd, text.data(), text.size()); }

void say_launch(const std::string& text) {
  write_all(STDERR_FILENO, "hourglass launch: " + text + "\n");
}

// Refuses a master port that something on this host already uses: rank 0 could not listen there.
void check_port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_runtime(fmt::format("socket() failed: {}", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  ::close(fd);
  if (rc == 0) return;
  if (err == EADDRINUSE) {
    throw_invalid(fmt::format("--master-port {}: port {} is already in use on this host (another "
                              "launch, or another program, listens there)",
                              port, port),
                  "pass --master-port with a free port (`ss -ltn` lists the ports in use)");
  }
  throw_invalid(
      fmt::format("--master-port {}: cannot bind port {}: {}", port, port, std::strerror(err)),
      "pass --master-port with a free port above 1023");
}

// One rank's output pipe: bytes read and not yet printed (an unfinished line).
struct Stream {
  int fd = -1;
  int out_fd = STDOUT_FILENO;
  std::string pending;
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  std::optional<int> status;  // the wait status once reaped
  Stream streams[2];
};

class Launcher {
 public:
  explicit Launcher(const LaunchArgs& args) : args_(args) {}

  int run() {
    block_signals();
    std::vector<std::string> env = child_environment_base();
    const std::string exe = self_path();
    for (int i = 0; i < args_.nproc; ++i) start(i, exe, env);
    say_launch(fmt::format("started {} rank{} of `{}` (master 127.0.0.1:{})", args_.nproc,
                           args_.nproc == 1 ? "" : "s", fmt::join(args_.command, " "),
                           args_.master_port));
    loop();
    return finish();
  }

 private:
  void block_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int signo : kForwarded) sigaddset(&set, signo);
    sigaddset(&set, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) throw_runtime(fmt::format("signalfd() failed: {}", std::strerror(errno)));
    // A reader of our output that goes away must not end the launcher before its ranks.
    ::signal(SIGPIPE, SIG_IGN);
  }

  static std::string self_path() {
    std::vector<char> buf(4096);
    const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
    if (n <= 0) throw_runtime(fmt::format("cannot read /proc/self/exe: {}", std::strerror(errno)));
    return std::string(buf.data(), size_t(n));
  }

  // This process's environment without the variables the launcher sets.
  static std::vector<std::string> child_environment_base() {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string_view entry(*e);
      const std::string_view name = entry.substr(0, entry.find('='));
      bool ours = false;
      for (const char* set : kSetVariables) ours = ours || name == set;
      if (!ours) env.emplace_back(entry);
    }
    return env;
  }

  void start(int index, const std::string& exe, std::vector<std::string> env) {
    for (const auto& [name, value] :
         {std::pair<const char*, std::string>{"RANK", std::to_string(index)},
          {"LOCAL_RANK", std::to_string(index)},
          {"WORLD_SIZE", std::to_string(args_.nproc)},
          {"LOCAL_WORLD_SIZE", std::to_string(args_.nproc)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(args_.master_port)},
          // NVLink SHARP (multicast) is off in every environment hourglass builds: it needs a
          // fabric manager setup the machines it runs on may not have.
          {"NCCL_NVLS_ENABLE", "0"}})
      env.push_back(fmt::format("{}={}", name, value));
    std::vector<std::string> argv_s = {exe};
    argv_s.insert(argv_s.end(), args_.command.begin(), args_.command.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw_runtime(fmt::format("pipe2() failed: {}", std::strerror(errno)));
    sigset_t child_mask;
    sigemptyset(&child_mask);
    for (int signo : kForwarded) sigaddset(&child_mask, signo);
    const pid_t parent = ::getpid();
    const pid_t group = ranks_.empty() ? 0 : ranks_.front().pid;
    const pid_t pid = ::fork();
    if (pid < 0) throw_runtime(fmt::format("fork() failed: {}", std::strerror(errno)));
    if (pid == 0) {
      // The child: only async-signal-safe calls until execve.
      ::setpgid(0, group);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl
      const int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::signal(SIGPIPE, SIG_DFL);
      ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      const char message[] = "hourglass launch: execve of the hourglass binary failed\n";
      if (::write(STDERR_FILENO, message, sizeof(message) - 1) < 0) {
        // Nothing more to report with.
      }
      ::_exit(127);
    }
    // Also here, so that the group exists before the next rank joins it.
    ::setpgid(pid, group == 0 ? pid : group);
    ::close(out[1]);
    ::close(err[1]);
    Rank& rank = ranks_.emplace_back();
    rank.index = index;
    rank.pid = pid;
    rank.streams[0] = {out[0], STDOUT_FILENO, {}};
    rank.streams[1] = {err[0], STDERR_FILENO, {}};
  }

  int running() const {
    int n = 0;
    for (const Rank& r : ranks_) n += r.status ? 0 : 1;
    return n;
  }

  void send_all(int signo) {
    for (const Rank& r : ranks_)
      if (!r.status) ::kill(r.pid, signo);
  }

  void loop() {
    // Once every rank has ended, output still held by a process they started is read for at
    // most this long.
    constexpr auto kDrain = std::chrono::seconds(2);
    std::optional<Clock::time_point> drain_until;
    while (true) {
      std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}};
      std::vector<Stream*> streams;
      for (Rank& r : ranks_)
        for (Stream& s : r.streams)
          if (s.fd >= 0) {
            fds.push_back({s.fd, POLLIN, 0});
            streams.push_back(&s);
          }
      if (running() == 0) {
        if (streams.empty()) return;
        if (!drain_until) drain_until = Clock::now() + kDrain;
      }
      std::optional<Clock::time_point> wake = drain_until;
      if (kill_at_ && (!wake || *kill_at_ < *wake)) wake = kill_at_;
      int timeout_ms = -1;
      if (wake) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now());
        timeout_ms = int(std::max<int64_t>(0, left.count()));
      }
      const int rc = ::poll(fds.data(), fds.size(), timeout_ms);
      if (rc < 0 && errno != EINTR)
        throw_runtime(fmt::format("poll() failed: {}", std::strerror(errno)));
      if (fds[0].revents & POLLIN) read_signals();
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_stream(*streams[i - 1]);
      if (kill_at_ && Clock::now() >= *kill_at_) {
        kill_at_.reset();
        for (const Rank& r : ranks_)
          if (!r.status)
            say_launch(fmt::format("rank {} still runs {} s after SIGTERM: sending SIGKILL",
                                   r.index, args_.grace_seconds));
        send_all(SIGKILL);
      }
      if (drain_until && Clock::now() >= *drain_until) {
        for (Rank& r : ranks_)
          for (Stream& s : r.streams) close_stream(s);
        return;
      }
    }
  }

  void read_signals() {
    signalfd_siginfo info;
    while (::read(signal_fd_, &info, sizeof(info)) == ssize_t(sizeof(info))) {
      const int signo = int(info.ssi_signo);
      if (signo == SIGCHLD) {
        reap();
      } else {
        const int n = running();
        say_launch(fmt::format("{}: sending it to {} running rank{}", signal_text(signo), n,
                               n == 1 ? "" : "s"));
        send_all(signo);
      }
    }
  }

  void reap() {
    for (Rank& r : ranks_) {
      if (r.status) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.status = status;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok || first_failure_) continue;
      first_failure_ = r.index;
      const int others = running();
      say_launch(fmt::format(
          "rank {} {}: stopping the other {} rank{} (SIGTERM, SIGKILL after {} s)", r.index,
          describe(status), others, others == 1 ? "" : "s", args_.grace_seconds));
      if (others > 0) {
        send_all(SIGTERM);
        kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(args_.grace_seconds));
      }
    }
  }

  void read_stream(Stream& s) {
    const int rank = rank_of(s);
    char buf[65536];
    const ssize_t n = ::read(s.fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      if (!s.pending.empty()) print_line(rank, s, s.pending);
      s.pending.clear();
      close_stream(s);
      return;
    }
    s.pending.append(buf, size_t(n));
    size_t start = 0;
    for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1)
      print_line(rank, s, std::string_view(s.pending).substr(start, nl - start));
    s.pending.erase(0, start);
    // A rank that writes without newlines (a progress bar) is printed in pieces.
    if (s.pending.size() >= sizeof(buf)) {
      print_line(rank, s, s.pending);
      s.pending.clear();
    }
  }

  int rank_of(const Stream& s) const {
    for (const Rank& r : ranks_)
      if (&r.streams[0] == &s || &r.streams[1] == &s) return r.index;
    return -1;
  }

  static void print_line(int rank, const Stream& s, std::string_view line) {
    write_all(s.out_fd, fmt::format("[rank {}] {}\n", rank, line));
  }

  static void close_stream(Stream& s) {
    if (s.fd >= 0) ::close(s.fd);
    s.fd = -1;
  }

  int finish() {
    if (!first_failure_) return 0;
    const Rank& failed = ranks_[size_t(*first_failure_)];
    std::vector<std::string> others;
    for (const Rank& r : ranks_)
      if (r.index != failed.index && r.status && *r.status != 0)
        others.push_back(fmt::format("rank {} {}", r.index, describe(*r.status)));
    say_launch(fmt::format("failed: rank {} {} (the first rank to fail){}{}", failed.index,
                           describe(*failed.status), others.empty() ? "" : "; then ",
                           fmt::join(others, ", ")));
    const int status = *failed.status;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }

  const LaunchArgs& args_;
  int signal_fd_ = -1;
  std::vector<Rank> ranks_;
  std::optional<int> first_failure_;
  std::optional<Clock::time_point> kill_at_;
};

}  // namespace

Runner add_launch(CLI::App& app) {
  auto a = std::make_shared<LaunchArgs>();
  CLI::App* sub = app.add_subcommand(
      "launch",
      "Run N processes of an hourglass subcommand on this host, with torchrun's environment "
      "(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; NCCL_NVLS_ENABLE=0): "
      "hourglass launch --nproc 2 -- train CONFIG. Signals go to every rank; when one rank "
      "fails the others are stopped and the launch exits with its code.");
  sub->add_option("--nproc", a->nproc, "number of processes (ranks) to start")
      ->required()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--master-port", a->master_port,
                  "port of rank 0's rendezvous on 127.0.0.1 (refused when in use)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  sub->add_option("--grace", a->grace_seconds,
                  "seconds the other ranks get to stop after one fails, before SIGKILL (0 to "
                  "86400)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& text) {
            // CLI11's ranges let NaN through, and 1e10 s would overflow the wait's clock.
            char* end = nullptr;
            const double v = std::strtod(text.c_str(), &end);
            return *end == '\0' && std::isfinite(v) && v >= 0 && v <= 86400
                       ? std::string()
                       : "--grace " + text + ": seconds from 0 to 86400";
          },
          "SECONDS"));
  sub->add_option("command", a->command,
                  "the hourglass subcommand and its arguments, after --: -- train CONFIG")
      ->required();
  return [a] {
    if (a->command.front() == "launch") {
      throw_invalid("hourglass launch: the command to run is itself `launch`",
                    "name the subcommand the ranks run: hourglass launch --nproc N -- train "
                    "CONFIG");
    }
    check_port_free(a->master_port);
    return Launcher(*a).run();
  };
}

}  // namespace hg::cli
