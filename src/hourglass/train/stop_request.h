// A process-wide request to stop training at the next step boundary, checkpointed and resumable.
//
// The CLI's signal handlers (SIGTERM, SIGINT, SIGUSR1) call request_stop_from_signal(), which
// only stores into a lock-free atomic and so is async-signal-safe; the trainer polls
// stop_requested() after every optimizer step, writes a checkpoint and returns with
// Trainer::stopped() set. Library code installs no handlers and never exits the process.
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

}  // namespace hg::train
