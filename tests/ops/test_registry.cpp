// Every op of the list (src/hourglass/ops/op_list.h) must be called as ops::<name>( by an op
// test in tests/ops/, and every op a backend implements (HG_OP) by a GPU test there too (a
// test file that starts its tests with HG_REQUIRE_GPU). Fails naming each op that is not.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ListedOp {
  const char* name;
  bool backend;  // HG_OP (every backend implements it), not HG_COMPOSITE_OP
};

const ListedOp kOps[] = {
#define HG_OP(ret, name, params, ...) {#name, true},
#define HG_COMPOSITE_OP(ret, name, params, ...) {#name, false},
#include "hourglass/ops/op_list.h"
};

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The op test sources of tests/ops/ (this file excluded), all of them and the GPU ones.
struct TestSources {
  std::string all, gpu;
};
TestSources read_op_tests() {
  TestSources sources;
  for (const auto& entry : std::filesystem::directory_iterator(HG_SOURCE_DIR "/tests/ops")) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("test_", 0) != 0 || file == "test_registry.cpp") continue;
    const std::string text = read(entry.path());
    sources.all += text;
    if (text.find("HG_REQUIRE_GPU()") != std::string::npos) sources.gpu += text;
  }
  return sources;
}

bool calls(const std::string& sources, const char* op) {
  return sources.find(std::string("ops::") + op + "(") != std::string::npos;
}

TEST(OpRegistry, TheListHasTheOps) {
  // A guard against an include that expanded to nothing.
  EXPECT_GE(std::size(kOps), 30u);
}

TEST(OpRegistry, EveryOpHasATest) {
  const TestSources tests = read_op_tests();
  ASSERT_FALSE(tests.all.empty()) << "no op tests found under " HG_SOURCE_DIR "/tests/ops";
  for (const ListedOp& op : kOps)
    EXPECT_TRUE(calls(tests.all, op.name))
        << "op '" << op.name << "' (op_list.h) is called by no test in tests/ops/: add a "
        << "test comparing it with a float64 reference";
}

TEST(OpRegistry, EveryBackendOpHasAGpuTest) {
  const TestSources tests = read_op_tests();
  ASSERT_FALSE(tests.gpu.empty()) << "no GPU op tests (HG_REQUIRE_GPU) under tests/ops";
  for (const ListedOp& op : kOps)
    if (op.backend)
      EXPECT_TRUE(calls(tests.gpu, op.name))
          << "op '" << op.name << "' (op_list.h) is called by no GPU test in tests/ops/: add "
          << "one comparing the GPU kernel with the CPU on random inputs";
}

}  // namespace
