// The fused batch norm + residual add + ReLU in the ResNets (BatchNorm2d::forward_relu): with
// the engine's fused_batch_norm on and off (the step's ExecutionContext), a few training steps of
// ResNet-18 (basic blocks) and ResNet-50 (bottlenecks) give the same weights, running statistics,
// losses and gradients bit for bit on the CPU (whose fused ops compose the unfused kernels), with
// and without activation recomputation, and with a downsampling block's two batch norms fused into
// one op or not; the fused ops run, by name, only when the settings are on and the model trains;
// eval mode gives the same outputs either way; fn::batch_norm_relu's gradients match the
// unfused composition's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hourglass/autograd/functions.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/op_profile.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/step/recompute_plan.h"
#include "hourglass/train/step/train_step.h"
#include "support/compare.h"

namespace hg {
namespace {

constexpr int64_t kRows = 8, kSide = 16, kChannels = 3;

// The engine's defaults with the fused batch norm (and the shortcut's pairing) as given.
ops::EngineSettings engine(bool fused, bool shortcut = true) {
  ops::EngineSettings e;
  e.fused_batch_norm = fused;
  e.fused_shortcut_batch_norm = shortcut;
  return e;
}

struct Rig {
  std::shared_ptr<nn::Module> model;
  FlatParameters flat;
  std::unique_ptr<optim::Sgd> sgd;
  std::unique_ptr<train::TrainStep> step;
  Tensor images, labels;
};

Rig make_rig(const std::string& name, const ops::EngineSettings& settings, bool recompute_all) {
  nn::ModelSpec spec;
  spec.name = name;
  spec.stem = "cifar";
  spec.in_channels = kChannels;
  spec.height = spec.width = kSide;
  spec.num_classes = 5;
  spec.base_channels = 8;
  Rig r;
  r.model = nn::make_model(spec);
  nn::initialize(*r.model, 11);
  r.model->train();
  r.flat = nn::build_parameter_arena(*r.model, nn::DecayScope::All);
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  r.sgd = std::make_unique<optim::Sgd>(r.flat, o);
  train::StepOptions so;
  so.micro_batch = kRows;
  if (recompute_all)
    for (const auto& [block, m] : nn::recompute_candidates(*r.model)) so.recompute.push_back(block);
  train::ExecutionContext context;
  context.engine = settings;
  r.step = std::make_unique<train::TrainStep>(*r.model, *r.sgd, context, so);
  r.images = test::f32_tensor(test::random_values(kRows * kSide * kSide * kChannels, 23),
                              {kRows, kSide, kSide, kChannels});
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < kRows; ++i) labels.push_back((i * 3 + 1) % 5);
  r.labels = Tensor::from_vector(labels, {kRows});
  return r;
}

struct Trajectory {
  std::vector<double> weights, buffers, losses, grads;
};

Trajectory train_steps(const std::string& name, const ops::EngineSettings& settings,
                       bool recompute_all, int steps) {
  Rig r = make_rig(name, settings, recompute_all);
  Trajectory t;
  for (int i = 0; i < steps; ++i) t.losses.push_back(r.step->run(r.images, r.labels).loss.item());
  t.weights = test::to_doubles(r.flat.params);
  t.buffers = test::to_doubles(r.flat.buffers);
  r.step->forward_backward(r.images, r.labels);
  t.grads = test::to_doubles(r.flat.grads);
  return t;
}

void expect_same(const Trajectory& a, const Trajectory& b) {
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.buffers, b.buffers) << "batch-norm running statistics";
  EXPECT_EQ(a.grads, b.grads);
}

TEST(FusedBatchNorm, Resnet18TrainsTheSameBitsFusedAndUnfused) {
  expect_same(train_steps("resnet18", engine(true), false, 3),
              train_steps("resnet18", engine(false), false, 3));
}

TEST(FusedBatchNorm, Resnet50BottlenecksTrainTheSameBitsFusedAndUnfused) {
  expect_same(train_steps("resnet50", engine(true), false, 2),
              train_steps("resnet50", engine(false), false, 2));
}

TEST(FusedBatchNorm, RecomputedBlocksTrainTheSameBitsFusedAndUnfused) {
  // Recomputation re-runs the fused forward with scratch running statistics.
  expect_same(train_steps("resnet18", engine(true), true, 3),
              train_steps("resnet18", engine(false), false, 3));
}

// How many times the ops named `name` ran during one training step.
int count_ops(Rig& r, const char* name) {
  ops::OpProfiler profiler(Device::cpu());
  profiler.install();
  r.step->run(r.images, r.labels);
  profiler.uninstall();
  int n = 0;
  for (const ops::OpEvent& e : profiler.events()) n += std::string(e.name) == name;
  return n;
}

TEST(FusedBatchNorm, FusedOpsRunByNameOnlyWhenSwitchedOn) {
  // ResNet-18: the stem's batch norm and both of each of the 8 blocks' are fused (the stem's and
  // each block's first with a ReLU, the identity blocks' second with the add too); in the three
  // downsampling blocks the second is fused with the shortcut's (a pair), unless that is off,
  // when the shortcut's runs as a plain batch_norm_train. The profiler names each call by the
  // member of the batch_norm_train family it is.
  {
    Rig r = make_rig("resnet18", engine(true, true), false);
    EXPECT_EQ(count_ops(r, "batch_norm_train+relu"), 9);
    EXPECT_EQ(count_ops(r, "batch_norm_train+add+relu"), 5);
    EXPECT_EQ(count_ops(r, "batch_norm_backward+relu"), 9);
    EXPECT_EQ(count_ops(r, "batch_norm_backward+add+relu"), 5);
    EXPECT_EQ(count_ops(r, "batch_norm_train+shortcut+relu"), 3);
    EXPECT_EQ(count_ops(r, "batch_norm_backward+shortcut+relu"), 3);
    EXPECT_EQ(count_ops(r, "batch_norm_train"), 0);
    EXPECT_EQ(count_ops(r, "relu"), 0);
  }
  {
    Rig r = make_rig("resnet18", engine(true, false), false);
    EXPECT_EQ(count_ops(r, "batch_norm_train+relu"), 9);
    EXPECT_EQ(count_ops(r, "batch_norm_train+add+relu"), 8);
    EXPECT_EQ(count_ops(r, "batch_norm_backward+add+relu"), 8);
    EXPECT_EQ(count_ops(r, "batch_norm_train+shortcut+relu"), 0);
    EXPECT_EQ(count_ops(r, "batch_norm_train"), 3);  // the three downsampling shortcuts
  }
  {
    // The shortcut's pairing has no effect without the fused batch norm.
    Rig r = make_rig("resnet18", engine(false, true), false);
    EXPECT_EQ(count_ops(r, "batch_norm_train+relu"), 0);
    EXPECT_EQ(count_ops(r, "batch_norm_train+add+relu"), 0);
    EXPECT_EQ(count_ops(r, "batch_norm_train+shortcut+relu"), 0);
    EXPECT_EQ(count_ops(r, "batch_norm_train"), 20);
    EXPECT_EQ(count_ops(r, "relu"), 17);
  }
}

// The shortcut's batch norm fused into the block's last (a pair) or apart: the same bits on
// the CPU, ResNet-50's four downsampling bottlenecks included.
TEST(FusedBatchNorm, PairedShortcutBatchNormTrainsTheSameBits) {
  expect_same(train_steps("resnet50", engine(true, true), false, 2),
              train_steps("resnet50", engine(true, false), false, 2));
}

// The thread's engine settings come from the step's context while it runs, and go back after.
TEST(FusedBatchNorm, TheStepInstallsItsContextsEngineSettings) {
  EXPECT_TRUE(ops::fused_batch_norm());  // the default
  Rig r = make_rig("resnet18", engine(false), false);
  EXPECT_EQ(count_ops(r, "batch_norm_train+relu"), 0);
  EXPECT_TRUE(ops::fused_batch_norm());
  {
    ops::MathSettings m;
    m.engine = engine(false);
    const ops::MathSettingsScope scope(m);
    EXPECT_FALSE(ops::fused_batch_norm());
  }
  EXPECT_TRUE(ops::fused_batch_norm());
}

TEST(FusedBatchNorm, EvalGivesTheSameOutputsEitherWay) {
  std::vector<std::vector<double>> outputs;
  for (const bool fused : {true, false}) {
    Rig r = make_rig("resnet18", engine(fused), false);
    r.step->run(r.images, r.labels);  // running statistics away from their initial values
    ops::MathSettings m;
    m.engine = engine(fused);
    const ops::MathSettingsScope scope(m);
    r.model->eval();
    const autograd::NoGradGuard no_grad;
    outputs.push_back(test::to_doubles(r.model->forward(r.images)));
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

// fn::batch_norm_relu's one tape node against fn::relu(fn::add(fn::batch_norm(...))): the same
// gradients of x, weight, bias and residual (bit for bit on the CPU).
TEST(FusedBatchNorm, AutogradGradientsMatchTheUnfusedComposition) {
  const Shape shape{4, 5, 5, 6};
  const int64_t n = shape_numel(shape), c = shape.back();
  std::vector<std::vector<double>> grads[2];
  for (int fused = 0; fused < 2; ++fused) {
    Tensor x = test::f32_tensor(test::random_values(n, 1, -1.5, 2.5), shape);
    Tensor res = test::f32_tensor(test::random_values(n, 2), shape);
    Tensor w = test::f32_tensor(test::random_values(c, 3, 0.5, 1.5), {c});
    Tensor b = test::f32_tensor(test::random_values(c, 4, -0.5, 0.5), {c});
    Tensor rm = Tensor::zeros({c}), rv = Tensor::full({c}, 1.0);
    const Tensor g = test::f32_tensor(test::random_values(n, 5), shape);
    for (Tensor* t : {&x, &res, &w, &b}) t->set_requires_grad(true);
    autograd::Tape& tape = autograd::Tape::current();
    const Tensor y =
        fused == 1
            ? fn::batch_norm_relu(x, res, w, b, rm, rv, fn::BatchNormMode::Train, 0.1, 1e-5)
            : fn::relu(fn::add(fn::batch_norm(x, w, b, rm, rv, fn::BatchNormMode::Train, 0.1, 1e-5),
                               res));
    tape.backward(fn::sum(fn::mul(y, g)));
    for (Tensor* t : {&x, &res, &w, &b}) grads[fused].push_back(test::to_doubles(t->grad()));
  }
  ASSERT_EQ(grads[0].size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(grads[0][i], grads[1][i]) << "input " << i;
}

}  // namespace
}  // namespace hg
