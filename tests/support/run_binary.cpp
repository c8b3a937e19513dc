#include "support/run_binary.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

namespace hg::test {

RunResult run_hourglass(const std::string& args) {
  const std::string cmd = std::string(HG_BINARY_DIR "/hourglass ") + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {-1, "popen failed for: " + cmd};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace hg::test
