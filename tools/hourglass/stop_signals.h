// The CLI's handlers for SIGTERM, SIGINT and SIGUSR1, installed first thing in main() so that
// no signal finds the default action while the process starts.
//
// What a signal does depends on the subcommand and on how far the run is
// (train::StopPhase), and the handler prints what will happen:
// - before the subcommand is known (argument parsing): it is remembered, then handled as below;
// - train, before the run session touches its directory (loading the config, the data, the
//   device): the process ends at once with exit 75, nothing written;
// - train, from then on: a stop request (train/run/stop_request.h): the run stops before its first
//   step, after its current step or after the current evaluation, writes a checkpoint (none
//   before the first step) and exits 75; once the final weights are being written it is not
//   needed, and the run ends with exit 0;
// - every other subcommand: the default action (the process ends by the signal).
// A second SIGINT ends the process at once. The handlers unblock these signals, so a parent may
// start hourglass with them blocked to have even a signal sent before main() handled.
#pragma once

namespace hg::cli {

// Installs the handlers; the first call of main().
void install_stop_handlers();
// Once the subcommand is known. For train: returns the signal that arrived during parsing
// (0 if none; the caller ends with exit 75), and a later one follows the train rules. For any
// other subcommand: restores the default actions, re-raising a signal that arrived already.
int settle_stop_handlers(bool train);

}  // namespace hg::cli
