#include "support/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace hg::test {

namespace {

// The folders this process made, removed when it exits with every test passed (a failed test's
// are kept to be looked at). Each is the test's own (its name), so no other process uses it.
class MadeFolders {
 public:
  void add(const std::filesystem::path& p) {
    std::lock_guard lock(mutex_);
    paths_.push_back(p);
  }
  ~MadeFolders() {
    const ::testing::UnitTest* u = ::testing::UnitTest::GetInstance();
    if (u == nullptr || !u->Passed()) return;
    std::error_code ec;
    for (const auto& p : paths_) std::filesystem::remove_all(p, ec);
  }

 private:
  std::mutex mutex_;
  std::vector<std::filesystem::path> paths_;
};

MadeFolders& made_folders() {
  static MadeFolders folders;
  return folders;
}

}  // namespace

std::string fresh_temp_dir(const std::string& name) {
  // Under a folder of this build tree's own, so that two build trees testing at once (a CUDA
  // and a sanitizer build, or two checkouts) never share a test's folder.
  static const std::string tree =
      "hourglass-tests-" + std::to_string(std::hash<std::string>{}(HG_BINARY_DIR) % 1000000007);
  const std::filesystem::path p = std::filesystem::path(::testing::TempDir()) / tree / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  made_folders().add(p);
  return p.string();
}

}  // namespace hg::test
