// Scratch folders for tests.
#pragma once

#include <string>

namespace hg::test {

// <gtest temp dir>/<name>, emptied and created; returns its path. Removed when the process
// exits with every test passed; kept after a failure.
std::string fresh_temp_dir(const std::string& name);

}  // namespace hg::test
