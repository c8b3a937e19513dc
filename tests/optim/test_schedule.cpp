// Learning-rate schedules at known points, their validation, and the factory.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "hourglass/base/error.h"
#include "hourglass/optim/schedule.h"

namespace hg {
namespace {

using namespace hg::optim;

TEST(Schedule, Constant) {
  ConstantSchedule s(0.1);
  EXPECT_EQ(s.lr(0), 0.1);
  EXPECT_EQ(s.lr(123456), 0.1);
}

TEST(Schedule, WarmupThenCosine) {
  // base 0.1, 100 steps, 10 of warm-up, min 0.001.
  WarmupCosineSchedule s(0.1, 100, 10, 0.001);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.01);  // 0.1 * 1/10: the first step already moves
  EXPECT_DOUBLE_EQ(s.lr(4), 0.05);
  EXPECT_DOUBLE_EQ(s.lr(9), 0.1);                           // warm-up ends at the peak
  EXPECT_DOUBLE_EQ(s.lr(10), 0.1);                          // cosine starts at the peak
  EXPECT_DOUBLE_EQ(s.lr(55), 0.001 + (0.1 - 0.001) * 0.5);  // half-way: cos(pi/2) = 0
  EXPECT_DOUBLE_EQ(s.lr(32), 0.001 + 0.099 * 0.5 * (1 + std::cos(std::numbers::pi * 22.0 / 90.0)));
  EXPECT_NEAR(s.lr(100), 0.001, 1e-15);
  EXPECT_NEAR(s.lr(5000), 0.001, 1e-15);  // past the end: stays at min_lr
  for (int64_t t = 11; t < 100; ++t) EXPECT_LT(s.lr(t), s.lr(t - 1)) << t;  // strictly decays
}

TEST(Schedule, CosineWithoutWarmup) {
  WarmupCosineSchedule s(1.0, 4, 0, 0.0);
  EXPECT_DOUBLE_EQ(s.lr(0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(2), 0.5);
  EXPECT_NEAR(s.lr(4), 0.0, 1e-16);
}

TEST(Schedule, StepDecay) {
  StepDecaySchedule s(0.1, 30, 0.1);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(29), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(30), 0.01);
  EXPECT_DOUBLE_EQ(s.lr(59), 0.01);
  EXPECT_DOUBLE_EQ(s.lr(60), 0.001);
}

TEST(Schedule, MultiStepMatchesPyTorch) {
  // torch.optim.lr_scheduler.MultiStepLR(SGD(lr=0.2), milestones=[3, 5, 5, 9], gamma=0.5),
  // its rate before each of 12 optimizer steps (PyTorch 1.13): the repeated milestone counts
  // twice.
  const MultiStepSchedule s(0.2, {3, 5, 5, 9}, 0.5);
  const double torch[] = {0.2,   0.2,   0.2,   0.1,    0.1,    0.025,
                          0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125};
  for (int64_t step = 0; step < 12; ++step)
    EXPECT_DOUBLE_EQ(s.lr(step), torch[step]) << "step " << step;
  EXPECT_THROW(MultiStepSchedule(0.2, {}, 0.5), Error);
  EXPECT_THROW(MultiStepSchedule(0.2, {5, 3}, 0.5), Error);
  EXPECT_THROW(MultiStepSchedule(0.2, {0, 3}, 0.5), Error);
}

// torch.optim.lr_scheduler.ReduceLROnPlateau(SGD(lr=0.2), mode="min", factor=0.5, patience=2,
// threshold=1e-4, cooldown=1, min_lr=0.03), fed these losses one per epoch (PyTorch 1.13): its
// rate after each. Here each epoch is 10 steps; a cut applies from the step it was observed at.
TEST(Schedule, PlateauMatchesPyTorch) {
  const double losses[] = {1.0,  0.9,  0.95,    0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85,
                           0.85, 0.85, 0.79995, 0.7,  0.7,  0.7, 0.7,  0.7,  0.7,  0.7,  0.7};
  const double torch[] = {0.2,  0.2,  0.2,  0.2,  0.1,  0.1,  0.1,  0.1,  0.05, 0.05, 0.05, 0.05,
                          0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03};
  PlateauSchedule s(0.2, 0.5, 2, 1e-4, 1, 0.03);
  std::string state_after_7;
  for (size_t i = 0; i < std::size(losses); ++i) {
    const int64_t step = 10 * int64_t(i + 1);
    const double before = s.lr(step - 1);
    s.observe(losses[i], step);
    EXPECT_DOUBLE_EQ(s.lr(step), torch[i]) << "epoch " << i;
    EXPECT_DOUBLE_EQ(s.lr(step - 1), before) << "a cut changed an earlier step's rate";
    if (i == 7) state_after_7 = s.state();
  }
  // The state taken back continues as the original did, and gives every earlier step's rate.
  PlateauSchedule resumed(0.2, 0.5, 2, 1e-4, 1, 0.03);
  resumed.restore_state(state_after_7);
  PlateauSchedule replay(0.2, 0.5, 2, 1e-4, 1, 0.03);
  for (size_t i = 0; i < 8; ++i) replay.observe(losses[i], 10 * int64_t(i + 1));
  for (size_t i = 8; i < std::size(losses); ++i) {
    resumed.observe(losses[i], 10 * int64_t(i + 1));
    replay.observe(losses[i], 10 * int64_t(i + 1));
  }
  EXPECT_EQ(resumed.state(), s.state());
  for (int64_t step = 0; step < 260; ++step) EXPECT_DOUBLE_EQ(resumed.lr(step), s.lr(step));
  for (const char* bad : {"", "x 0 0 -", "inf -1 0 -", "inf 0 0 20,10", "inf 0 0 5x", "1 2 3 4 5"})
    EXPECT_THROW(resumed.restore_state(bad), Error) << bad;
  EXPECT_THROW(PlateauSchedule(0.2, 1.0, 2, 1e-4, 1, 0.0), Error);
}

TEST(Schedule, OneCycleMatchesPyTorch) {
  // torch.optim.lr_scheduler.OneCycleLR(max_lr=0.1, total_steps=100) defaults: pct_start 0.3,
  // div_factor 25, final_div_factor 1e4, cosine; values from its get_lr() formula.
  OneCycleSchedule cos(0.1, 100, 0.3, 25, 1e4, true);
  EXPECT_DOUBLE_EQ(cos.lr(0), 0.004);
  EXPECT_DOUBLE_EQ(cos.lr(10), 0.029516394846410082);
  EXPECT_DOUBLE_EQ(cos.lr(29), 0.1);
  EXPECT_DOUBLE_EQ(cos.lr(30), 0.099949653528452434);
  EXPECT_DOUBLE_EQ(cos.lr(64), 0.0500002);
  EXPECT_DOUBLE_EQ(cos.lr(99), 4e-7);
  EXPECT_DOUBLE_EQ(cos.lr(150), 4e-7);  // past the end: clamped (PyTorch would raise)
  OneCycleSchedule lin(0.1, 100, 0.3, 25, 1e4, false);
  EXPECT_DOUBLE_EQ(lin.lr(10), 0.037103448275862067);
  EXPECT_DOUBLE_EQ(lin.lr(30), 0.098571434285714285);
  EXPECT_DOUBLE_EQ(lin.lr(64), 0.0500002);
}

TEST(Schedule, FactoryBuildsEachName) {
  ScheduleParams p;
  p.base_lr = 0.2;
  p.total_steps = 50;
  p.warmup_steps = 5;
  p.step_size = 10;
  EXPECT_DOUBLE_EQ(make_schedule("constant", p)->lr(7), 0.2);
  EXPECT_DOUBLE_EQ(make_schedule("cosine", p)->lr(0), 0.04);
  EXPECT_DOUBLE_EQ(make_schedule("step", p)->lr(10), 0.02);
  p.milestones = {20, 40};
  EXPECT_DOUBLE_EQ(make_schedule("multi_step", p)->lr(20), 0.02);
  EXPECT_DOUBLE_EQ(make_schedule("one_cycle", p)->lr(0), 0.2 / 25);
  for (const auto& name : schedule_names())
    EXPECT_FALSE(make_schedule(name, p)->describe().empty()) << name;
}

TEST(Schedule, UnknownNameListsValidOnes) {
  try {
    make_schedule("cosine_restarts", ScheduleParams{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    EXPECT_NE(e.message().find("cosine_restarts"), std::string::npos) << e.message();
    for (const auto& name : schedule_names())
      EXPECT_NE(e.one_line().find(name), std::string::npos) << e.one_line();
  }
}

TEST(Schedule, BadParametersAreErrors) {
  ScheduleParams p;  // total_steps 0, step_size 0
  EXPECT_THROW(make_schedule("cosine", p), Error);
  EXPECT_THROW(make_schedule("step", p), Error);
  EXPECT_THROW(make_schedule("one_cycle", p), Error);
  p.total_steps = 10;
  p.warmup_steps = 11;
  EXPECT_THROW(make_schedule("cosine", p), Error);
  p.warmup_steps = 0;
  p.pct_start = 1.0;
  EXPECT_THROW(make_schedule("one_cycle", p), Error);
  EXPECT_THROW(ConstantSchedule(-0.1), Error);
}

}  // namespace
}  // namespace hg
