// Runs the built hourglass binary from a test and captures what it prints.
#pragma once

#include <string>

namespace hg::test {

struct RunResult {
  int code;            // exit status; -1 when it did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `<build>/hourglass ARGS` through the shell.
RunResult run_hourglass(const std::string& args);

struct SplitRunResult {
  int code;         // exit status; -1 when it did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `ENV <build>/hourglass ARGS` through the shell with stdout and stderr captured apart.
// `env` goes before the binary: "NO_COLOR=1", "env -u NO_COLOR" or "".
SplitRunResult run_hourglass_split(const std::string& args, const std::string& env = "");

// Runs `ENV <build>/hourglass ARGS` through the shell with stdin, stdout and stderr on a
// pseudo-terminal, as from an interactive shell; `output` is what the terminal received.
RunResult run_hourglass_on_terminal(const std::string& args, const std::string& env = "");

}  // namespace hg::test
