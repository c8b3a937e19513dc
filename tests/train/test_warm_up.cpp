// train.warm_up: the step runs every batch shape of an epoch once before the first epoch
// (the full and last training batches, each cut into the step's micro-batches, and the full and
// last evaluation batches), and nothing the run computes changes: on the CPU ("on" forces it
// there) a run with the warm-up ends with the weights, running statistics and accuracies of one
// without, bit for bit, and the step right after the warm-up holds the freshly initialised
// model with zero gradients.
#include <gtest/gtest.h>

#include <cstring>

#include "hourglass/train/step/warm_up.h"
#include "hourglass/train/trainer.h"
#include "hourglass/train/training_setup.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

// A model with batch norm; 60 training samples in batches of 24 (the last of 12), two
// micro-batches of 12 each, and 40 test samples in evaluation batches of 16 (the last of 8)
// scored with their mirrors.
Config warm_up_config(const std::string& mode) {
  Config c = Config::parse(R"(
    seed = 5
    [model]
    name = "tiny_resnet"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 60, test_size = 40, height = 8, width = 8, channels = 3, classes = 4 }
    workers = 0
    augment = true
    [optim]
    lr = 0.05
    [train]
    epochs = 2
    batch_size = 24
    grad_accum = 2
    eval_batch_size = 16
    eval_flip = true
    label_smoothing = 0.1
  )",
                           "warm.toml");
  c.set_override("train.warm_up=\"" + mode + "\"");
  return c;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(WarmUp, LeavesTheFreshStepUntouched) {
  const train::RunConfig on = train::parse_run_config(warm_up_config("on"));
  const train::RunConfig off = train::parse_run_config(warm_up_config("off"));
  const train::TrainingSetup a = train::build_training(on);
  const train::TrainingSetup b = train::build_training(off);
  // 12-row micro-batches (both training batches), evaluation batches of 16 and 8.
  EXPECT_EQ(a.parts.startup.warm_up_shapes, 3);
  EXPECT_EQ(b.parts.startup.warm_up_shapes, 0);
  EXPECT_GT(a.parts.startup.warm_up, 0.0);
  EXPECT_TRUE(same_bytes(a.flat.params, b.flat.params));
  EXPECT_TRUE(same_bytes(a.flat.buffers, b.flat.buffers));
  const std::vector<float> grads = a.flat.grads.to_vector<float>();
  for (float g : grads) ASSERT_EQ(g, 0.0f);
  EXPECT_TRUE(a.parts.model->is_training());
}

TEST(WarmUp, ARunWithItEndsBitIdenticalToOneWithout) {
  train::Trainer a(warm_up_config("on"), {test::fresh_temp_dir("hourglass_warm_up_on"), false});
  train::Trainer b(warm_up_config("off"), {test::fresh_temp_dir("hourglass_warm_up_off"), false});
  const std::vector<train::EpochMetrics> ha = a.run(), hb = b.run();
  ASSERT_EQ(ha.size(), hb.size());
  EXPECT_TRUE(same_bytes(a.parameters().params, b.parameters().params));
  EXPECT_TRUE(same_bytes(a.parameters().buffers, b.parameters().buffers));
  for (size_t e = 0; e < ha.size(); ++e) {
    EXPECT_EQ(ha[e].train_loss, hb[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(ha[e].test_acc, hb[e].test_acc) << "epoch " << e + 1;
  }
}

TEST(WarmUp, StepWarmUpRunsEachShapeOnce) {
  const train::RunConfig off = train::parse_run_config(warm_up_config("off"));
  train::TrainingSetup s = train::build_training(off);
  train::StepWarmUp warm_up(*s.step);
  train::WarmUpShapes shapes;
  shapes.sample = {8, 8, 3};
  shapes.train_rows = {24, 12, 5};  // micro-batches of 12, 12 and 5 (the plan's 12 rows)
  shapes.eval_rows = {16};
  warm_up.run(shapes);
  EXPECT_EQ(warm_up.shapes_run(), 3);
  shapes.train_rows = {24, 7};  // 7: one new micro-batch
  shapes.eval_rows = {16, 3};   // 3: one new evaluation batch
  warm_up.run(shapes);
  EXPECT_EQ(warm_up.shapes_run(), 5);
  // Progressive resizing: each training sample shape's micro-batches (12 and 7 rows at 12x12
  // are new; evaluation stays at `sample`).
  shapes.train_samples = {{8, 8, 3}, {12, 12, 3}};
  warm_up.run(shapes);
  EXPECT_EQ(warm_up.shapes_run(), 7);
}

TEST(WarmUp, AnUnknownModeIsRefusedNamingTheKey) {
  test::expect_invalid([] { train::parse_run_config(warm_up_config("always")); },
                       {"train.warm_up", "always", "\"auto\""});
}

}  // namespace
}  // namespace hg
