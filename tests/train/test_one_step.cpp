// The training step is written once: outside the autograd and optim layers themselves, only
// src/hourglass/train/step/train_step.cpp may call backward or an optimizer update. This reads
// every source file under src/ and tools/ and fails naming any other file that does, so a second
// copy of the step (in a command, a probe, a trainer) cannot creep back in.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Source text without // comments, so a comment that describes the step does not count.
std::string code_of(const std::string& text) {
  static const std::regex comment(R"(//[^\n]*)");
  return std::regex_replace(text, comment, "");
}

struct Finding {
  std::string file, call;
};

std::vector<Finding> step_calls_outside_the_step() {
  const fs::path root = HG_SOURCE_DIR;
  // backward through the tape, an optimizer's update, or the update ops themselves.
  const std::regex call(R"((autograd::backward\(|(->|\.)step\(\)|ops::(sgd|adamw)_step\())");
  std::vector<Finding> found;
  for (const char* top : {"src", "tools"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file()) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh") continue;
      const std::string rel = fs::relative(entry.path(), root).string();
      // The layers that define backward and the updates, and the one step that strings them.
      if (rel.rfind("src/hourglass/autograd/", 0) == 0 ||
          rel.rfind("src/hourglass/optim/", 0) == 0 ||
          rel == "src/hourglass/train/step/train_step.cpp")
        continue;
      const std::string code = code_of(read(entry.path()));
      for (auto it = std::sregex_iterator(code.begin(), code.end(), call);
           it != std::sregex_iterator(); ++it)
        found.push_back({rel, (*it)[1]});
    }
  }
  return found;
}

TEST(OneTrainingStep, OnlyTrainStepCallsBackwardAndTheOptimizer) {
  const std::vector<Finding> found = step_calls_outside_the_step();
  for (const Finding& f : found)
    ADD_FAILURE() << f.file << " calls " << f.call
                  << ": run the training step through train::TrainStep (train_step.h) instead";
}

TEST(OneTrainingStep, TheScanFindsTheStepItself) {
  // The pattern must match the real calls, or the test above could never fail.
  const std::string code =
      code_of(read(fs::path(HG_SOURCE_DIR) / "src/hourglass/train/step/train_step.cpp"));
  EXPECT_NE(code.find("autograd::backward("), std::string::npos);
  EXPECT_TRUE(std::regex_search(code, std::regex(R"((->|\.)step\(\))")));
}

}  // namespace
