// backend/gpu/dnn_miopen.cpp, compiled against ROCm 6.2's miopen.h and run against the fake
// library of fake_miopen.cpp: in deterministic mode it chooses every convolution algorithm
// without a timing call, records the choice, and a resumed process takes the recorded choice.
#include <gtest/gtest.h>

#include "fake_miopen.h"
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/base/error.h"
#include "hourglass/ops/algorithm_choices.h"
#include "hourglass/ops/math_settings.h"

namespace hg {
namespace {

namespace fm = test::fake_miopen;
using gpu::MathMode;
using gpu::dnn::ConvGeometry;

miopenConvSolution_t solution(uint64_t id, size_t workspace) {
  miopenConvSolution_t s{};
  s.solution_id = id;
  s.workspace_size = workspace;
  s.algorithm = miopenConvolutionAlgoImplicitGEMM;
  return s;
}

// Lists `ids` (each with no workspace) for every pass, after one solution whose workspace
// exceeds the bound, which a choice must pass over.
void offer(std::initializer_list<uint64_t> ids) {
  for (auto& list : fm::state().solutions) {
    list = {solution(1, gpu::dnn::kMaxWorkspaceBytes + 1)};
    for (uint64_t id : ids) list.push_back(solution(id, 0));
  }
}

// Runs the three passes of a 3x3 convolution with batch `n` (plans are cached per process for
// good, so each test takes its own n) `times` times each.
void run_passes(int64_t n, int times = 1) {
  const Tensor x = Tensor::zeros({n, 5, 5, 3});
  const Tensor w = Tensor::zeros({4, 3, 3, 3});
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const ConvGeometry g = ConvGeometry::of(x, w, p);
  Tensor y = Tensor::zeros({n, 5, 5, 4}), dx = Tensor::zeros({n, 5, 5, 3}),
         dw = Tensor::zeros({4, 3, 3, 3});
  for (int i = 0; i < times; ++i) {
    gpu::dnn::conv_forward(g, MathMode::Exact, x, w, y);
    gpu::dnn::conv_backward_data(g, MathMode::Exact, y, w, dx);
    gpu::dnn::conv_backward_filter(g, MathMode::Exact, y, x, dw);
  }
}

// The record key of pass `pass` of run_passes(n) in f32.
std::string key_of(const char* pass, int64_t n) {
  return fmt::format("MIOpen 3.2.0 {} f32 {},5,5,3,4,3,3,1,1,1,1,1,1,1", pass, n);
}

class MiopenChoice : public ::testing::Test {
 protected:
  void SetUp() override {
    fm::reset();
    ops::clear_algorithm_choices();
  }
  void TearDown() override { ops::set_deterministic(false); }
};

TEST_F(MiopenChoice, DeterministicModeTimesNothingAndRecordsEachChoice) {
  ops::set_deterministic(true);
  offer({12, 13});
  run_passes(/*n=*/2, /*times=*/3);
  EXPECT_EQ(fm::timing_calls(), 0);
  EXPECT_EQ(fm::state().deterministic_attribute, 1);
  for (int pass = 0; pass < 3; ++pass) {
    // The first listed solution that fits, compiled once, launched on every call.
    EXPECT_EQ(fm::state().compiled[pass], std::vector<uint64_t>{12}) << "pass " << pass;
    EXPECT_EQ(fm::state().launched[pass], (std::vector<uint64_t>{12, 12, 12})) << "pass " << pass;
  }
  EXPECT_EQ(fm::state().calls["ForwardGetSolution"], 1);
  EXPECT_EQ(fm::state().calls["ConvolutionForward"], 0);
  const ops::AlgorithmChoices expected = {{key_of("forward", 2), "12"},
                                          {key_of("backward data", 2), "12"},
                                          {key_of("backward filter", 2), "12"}};
  EXPECT_EQ(ops::algorithm_choices(), expected);
}

TEST_F(MiopenChoice, AResumedRunTakesItsRecordedChoiceOverMiopensNewOrder) {
  ops::set_deterministic(true);
  // The checkpoint's records (through their text form, as a checkpoint carries them): 13 for
  // the forward and backward-data passes; none for backward filter.
  const std::string saved = ops::encode_algorithm_choices(
      {{key_of("forward", 3), "13"}, {key_of("backward data", 3), "13"}});
  ops::adopt_algorithm_choices(ops::decode_algorithm_choices(saved, "test"));
  offer({12, 13});  // MIOpen's order now puts 12 first (a refreshed find-db)
  run_passes(/*n=*/3);
  EXPECT_EQ(fm::timing_calls(), 0);
  EXPECT_EQ(fm::state().launched[fm::kForward], std::vector<uint64_t>{13});
  EXPECT_EQ(fm::state().launched[fm::kBackwardData], std::vector<uint64_t>{13});
  EXPECT_EQ(fm::state().launched[fm::kBackwardFilter], std::vector<uint64_t>{12});
  EXPECT_EQ(ops::algorithm_choice(key_of("backward filter", 3)), "12");
}

TEST_F(MiopenChoice, ARecordedChoiceMiopenNoLongerListsIsMadeAgain) {
  ops::set_deterministic(true);
  ops::adopt_algorithm_choices({{key_of("forward", 4), "99"}});
  offer({12, 13});
  run_passes(/*n=*/4);
  EXPECT_EQ(fm::timing_calls(), 0);
  EXPECT_EQ(fm::state().launched[fm::kForward], std::vector<uint64_t>{12});
  EXPECT_EQ(ops::algorithm_choice(key_of("forward", 4)), "12");
}

TEST_F(MiopenChoice, NoDeterministicSolutionThatFitsIsAnErrorNamingTheFix) {
  ops::set_deterministic(true);
  offer({});  // only the solution whose workspace is too large
  try {
    run_passes(/*n=*/5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(std::string(e.what()).find("no deterministic forward solution"), std::string::npos)
        << e.what();
    EXPECT_NE(e.remedy().find("deterministic = false"), std::string::npos) << e.remedy();
  }
  EXPECT_EQ(fm::timing_calls(), 0);
}

// The fake sees timing when there is some: without determinism each pass is found once.
TEST_F(MiopenChoice, WithoutDeterminismEachPassIsTimedOnce) {
  offer({12});
  run_passes(/*n=*/6, /*times=*/2);
  EXPECT_EQ(fm::timing_calls(), 3);
  EXPECT_EQ(fm::state().calls["ForwardGetSolution"], 0);
  EXPECT_EQ(fm::state().calls["ConvolutionForward"], 2);
  EXPECT_TRUE(ops::algorithm_choices().empty());
}

}  // namespace
}  // namespace hg
