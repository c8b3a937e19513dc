#include "support/run_files.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "hourglass/tensor/safetensors.h"

namespace hg::test {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

int64_t last_checkpoint_step(const std::string& run_dir) {
  const std::string name = read_file(run_dir + "/checkpoints/last");
  if (name.size() < 14 || name.rfind("step-", 0) != 0) return -1;
  return std::stoll(name.substr(5, 9));
}

void expect_same_final_tensors(const std::string& ref_dir, const std::string& dir) {
  SafetensorsFile a = load_safetensors(ref_dir + "/final.safetensors");
  SafetensorsFile b = load_safetensors(dir + "/final.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    ASSERT_EQ(a.tensors[i].name, b.tensors[i].name);
    const Tensor &ta = a.tensors[i].tensor, &tb = b.tensors[i].tensor;
    ASSERT_EQ(ta.nbytes(), tb.nbytes());
    EXPECT_EQ(std::memcmp(ta.data_ptr(), tb.data_ptr(), ta.nbytes()), 0) << a.tensors[i].name;
  }
}

}  // namespace hg::test
