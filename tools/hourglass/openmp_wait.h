// The OpenMP pool's wait at the end of each parallel region, for a machine that other programs
// share. libgomp's default has an idle worker spin for about 300,000 iterations before it
// sleeps; when another process holds a core, the spinning thread burns the time slice that the
// thread it waits for needs, and every region waits a scheduler tick. On 2 cores beside 2 busy
// processes the quickstart's epoch ran at 1,337 images/s with 2 threads and 2,447 with one
// (bench/cpu_shared_machine.sh). With GOMP_SPINCOUNT=3000 it ran at 2,794 there and within 2%
// of the default on an idle machine (6,816 against 6,911). The spin changes no result.
//
// libgomp reads its environment once, when it is loaded, before main() runs; so the command
// sets GOMP_SPINCOUNT and executes itself again (the same process: /proc/self/exe with the same
// arguments) when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set. Either one set by the user
// is left as it is.
#pragma once

namespace hg::cli {

inline constexpr const char* kGompSpinCount = "3000";

// Called first thing in main(); returns only when nothing was to be done or the exec failed.
void apply_openmp_wait_default(char** argv);

}  // namespace hg::cli
