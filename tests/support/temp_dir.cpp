#include "support/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace hg::test {

std::string fresh_temp_dir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace hg::test
