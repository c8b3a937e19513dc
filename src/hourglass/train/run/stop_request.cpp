#include "hourglass/train/run/stop_request.h"

#include <atomic>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

namespace hg::train {

namespace {

// 0: none; > 0: the signal number; -1: requested from code.
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free flag");
std::atomic<int> g_phase{int(StopPhase::Setup)};

}  // namespace

void request_stop_from_signal(int signo) noexcept { g_stop.store(signo > 0 ? signo : -1); }

void request_stop() noexcept { g_stop.store(-1); }

bool stop_requested() noexcept { return g_stop.load(std::memory_order_relaxed) != 0; }

std::string consume_stop_request() {
  const int v = g_stop.exchange(0);
  if (v == 0) return "";
  if (v < 0) return "a stop request";
  switch (v) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return fmt::format("signal {} ({})", v, strsignal(v));
  }
}

void clear_stop_request() noexcept { g_stop.store(0); }

void set_stop_phase(StopPhase phase) noexcept { g_phase.store(int(phase)); }

StopPhase stop_phase() noexcept { return StopPhase(g_phase.load()); }

}  // namespace hg::train
