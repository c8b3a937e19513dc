// Reading what a run leaves in its directory, for the CLI tests.
#pragma once

#include <cstdint>
#include <string>

namespace hg::test {

// The whole file ("" when it cannot be read).
std::string read_file(const std::string& path);

// The step of the newest checkpoint of `run_dir`, as checkpoints/last names it; -1 before the
// first.
int64_t last_checkpoint_step(const std::string& run_dir);

// final.safetensors of both run directories holds the same tensors, bit for bit (gtest
// failures name the first tensor that differs).
void expect_same_final_tensors(const std::string& ref_dir, const std::string& dir);

}  // namespace hg::test
