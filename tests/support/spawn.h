// Starting processes from tests and waiting for them, with their output in a log file.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace hg::test {

struct SpawnOptions {
  bool truncate_log = false;         // start the log empty (default: append to it)
  std::vector<int> blocked_signals;  // signals the child starts with blocked (as a supervisor may)
};

// Starts argv[0] (a path) with the arguments after it and this process's environment; its
// stdout and stderr go to `log`. Returns the process id, or -1 after a test failure naming the
// program when it cannot start.
pid_t spawn_logged(const std::vector<std::string>& argv, const std::string& log,
                   const SpawnOptions& options = {});

// The wait status of child `pid` once it ends within `seconds` (0: only look), else nullopt.
std::optional<int> wait_status(pid_t pid, double seconds);

// The exit code of a wait status; -1 when a signal ended the process.
int exit_code(int status);

}  // namespace hg::test

namespace hg::test {

// Open MPI's plugins leave allocations unfreed at MPI_Finalize (tests/CMakeLists.txt): the
// processes a test starts from now on that initialise MPI get no LeakSanitizer leak check
// (ASAN_OPTIONS gains detect_leaks=0; address and undefined-behaviour checks stay on). Harmless
// in builds without the sanitizers.
void without_leak_checks_in_children();

}  // namespace hg::test
