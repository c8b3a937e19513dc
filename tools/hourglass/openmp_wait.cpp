#include "openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace hg::cli {

void apply_openmp_wait_default(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (::setenv("GOMP_SPINCOUNT", kGompSpinCount, 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // No exec (no /proc): the default spin, and the variable stays for the processes started.
}

}  // namespace hg::cli
