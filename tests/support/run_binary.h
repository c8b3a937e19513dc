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

}  // namespace hg::test
