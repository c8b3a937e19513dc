// Profiler ranges (device/trace_range.h): in a CUDA build, NVTX hands every range to the
// injection library NVTX_INJECTION64_PATH names, as Nsight Systems' is; a stand-in
// (fakes/fake_nvtx.cpp) logs them, and a training step on the CPU shows its forward, backward
// and update phases as nested, balanced ranges. Other builds have no NVTX: the test skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "hourglass/device/trace_range.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/step/train_step.h"
#include "support/compare.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(TraceRange, ATrainingStepsPhasesReachTheProfiler) {
#ifndef HG_FAKE_NVTX
  GTEST_SKIP() << "this build has no NVTX (CUDA builds only)";
#else
  // Before the first range of the process: NVTX reads the variable once, at its first call.
  const std::string log = test::fresh_temp_dir("hourglass_trace_range") + "/ranges.txt";
  ::setenv("NVTX_INJECTION64_PATH", HG_FAKE_NVTX, 1);
  ::setenv("FAKE_NVTX_LOG", log.c_str(), 1);
  {
    TraceRange outer("outer");
    TraceRange inner("inner");
  }
  nn::ModelSpec spec;
  spec.name = "small_cnn";
  spec.in_channels = 1;
  spec.height = spec.width = 8;
  spec.num_classes = 3;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 1);
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
  optim::Sgd sgd(flat, SgdOptions{});
  train::TrainStep step(*model, sgd, {}, {.micro_batch = 4});  // two micro-batches of 8 rows
  const Tensor x = test::f32_tensor(test::random_values(8 * 8 * 8, 3), {8, 8, 8, 1});
  const Tensor y = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8});
  step.run(x, y);
  const std::vector<std::string> expected = {"push outer",   "push inner", "pop",           "pop",
                                             "push forward", "pop",        "push backward", "pop",
                                             "push forward", "pop",        "push backward", "pop",
                                             "push update",  "pop"};
  EXPECT_EQ(lines_of(log), expected);
#endif
}

}  // namespace
}  // namespace hg
