#include "stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string_view>

#include "commands.h"
#include "hourglass/train/run/stop_request.h"

namespace hg::cli {

namespace {

// 0 until settle_stop_handlers(true); then signals follow the train rules.
std::atomic<int> g_train{0};
// A signal that arrived before the subcommand was known.
std::atomic<int> g_early_signal{0};

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};

// Only async-signal-safe calls here: write() of constant strings.
void say(std::string_view text) {
  if (::write(STDERR_FILENO, text.data(), text.size()) < 0) {
    // Nothing to do about a failed message.
  }
}

std::string_view signal_name(int signo) {
  switch (signo) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

extern "C" void on_stop_signal(int signo) {
  if (g_train.load() == 0) {
    g_early_signal.store(signo);
    return;
  }
  // The request first, then the phase: a phase read before the run moved on is one the run
  // still honours the request in (it reads the request after moving on).
  train::request_stop_from_signal(signo);
  const train::StopPhase phase = train::stop_phase();
  say("\nhourglass: ");
  say(signal_name(signo));
  switch (phase) {
    case train::StopPhase::Setup:
      say(" before the run directory was touched: nothing written, exit 75\n");
      ::_exit(kExitStopped);
    case train::StopPhase::Starting:
      say(": stopping before the first step (no new checkpoint needed), then exit 75");
      break;
    case train::StopPhase::Training:
      say(": stopping after this step or evaluation (checkpoint, then exit 75)");
      break;
    case train::StopPhase::Finishing:
      say(": the run is complete and writing its final weights; it ends with exit 0");
      break;
  }
  say(signo == SIGINT ? "; Ctrl-C again aborts\n" : "\n");
}

}  // namespace

// SIGINT resets to the default action once caught (SA_RESETHAND), so a second Ctrl-C aborts.
// The signals are unblocked last: a parent that starts hourglass with them blocked (closing the
// window before main(), while the dynamic loader runs) has them delivered here, handled.
void install_stop_handlers() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int signo : kSignals) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (signo == SIGINT ? SA_RESETHAND : 0);
    ::sigaction(signo, &sa, nullptr);
    sigaddset(&handled, signo);
  }
  ::sigprocmask(SIG_UNBLOCK, &handled, nullptr);
}

int settle_stop_handlers(bool train) {
  if (train) {
    g_train.store(1);
    return g_early_signal.load();
  }
  for (int signo : kSignals) {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    ::sigaction(signo, &sa, nullptr);
  }
  if (const int signo = g_early_signal.load(); signo != 0) ::raise(signo);
  return 0;
}

}  // namespace hg::cli
