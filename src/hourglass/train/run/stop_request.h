// A process-wide request to stop training at the next step boundary, checkpointed and resumable.
//
// The CLI's signal handlers (SIGTERM, SIGINT, SIGUSR1) call request_stop_from_signal(), which
// only stores into a lock-free atomic and so is async-signal-safe; the trainer polls
// stop_requested() before its first step, after every optimizer step and after every epoch's
// evaluation, writes a checkpoint (none before the first step: nothing is trained) and returns
// with Trainer::stopped() set. Library code installs no handlers and never exits the process.
#pragma once

#include <string>

namespace hg::train {

// Records a stop request from signal `signo` (> 0). Async-signal-safe.
void request_stop_from_signal(int signo) noexcept;
// Records a stop request from code (tests, an embedding application). Async-signal-safe.
void request_stop() noexcept;
// Whether a stop was requested and not yet consumed. One relaxed atomic load.
bool stop_requested() noexcept;
// Takes the pending request, if any, and describes it ("SIGTERM", "a stop request"); returns
// "" when none was pending. The trainer calls this when it honours a request, so that a later
// run in the same process starts clean.
std::string consume_stop_request();
// Drops any pending request (tests).
void clear_stop_request() noexcept;

// What honouring a stop request means at this moment. A run session advances it; a signal
// handler reads it to say what will happen (and, in Setup, may end the process at once, since
// nothing of the run is written yet). It never changes what the library does.
enum class StopPhase : int {
  Setup,      // no run session has touched its directory yet (the process start)
  Starting,   // a session prepares the run directory: the run stops before its first step
  Training,   // steps run: the run stops after the current step or evaluation, checkpointed
  Finishing,  // every epoch is done and the final weights are written: the run ends normally
};
// Async-signal-safe, both.
void set_stop_phase(StopPhase phase) noexcept;
StopPhase stop_phase() noexcept;

}  // namespace hg::train
