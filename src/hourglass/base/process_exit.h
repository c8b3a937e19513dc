// Ending the process without its teardown. A GPU process's exit handlers destroy the device
// context, its streams, graphs and library handles and return its memory one block at a time,
// which on the H200 machine took about 0.2 s after a run had closed every file it wrote
// (bench/README.md): a tenth of a short run's time to accuracy. The kernel reclaims all of it
// when the process ends anyway, so a command whose work is complete and whose files are closed
// may leave through exit_without_teardown(), which flushes stdio and the logs and calls
// _Exit.
//
// Something that must run at exit says so with require_orderly_exit() (MPI: mpirun counts a
// rank that ends without MPI_Finalize as failed); exit_without_teardown() then returns and the
// caller exits normally. Builds with the address or leak sanitizer always exit normally (their
// leak check runs at exit), and HOURGLASS_FAST_EXIT=0 turns it off.
#pragma once

namespace hg {

void require_orderly_exit();
// Ends the process with `code` unless an orderly exit is required; returns only then.
void exit_without_teardown(int code);

}  // namespace hg
