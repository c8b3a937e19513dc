#include "support/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

namespace hg::test {

std::string fresh_temp_dir(const std::string& name) {
  // Under a folder of this build tree's own, so that two build trees testing at once (a CUDA
  // and a sanitizer build, or two checkouts) never share a test's folder.
  static const std::string tree =
      "hourglass-tests-" + std::to_string(std::hash<std::string>{}(HG_BINARY_DIR) % 1000000007);
  const std::filesystem::path p = std::filesystem::path(::testing::TempDir()) / tree / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace hg::test
