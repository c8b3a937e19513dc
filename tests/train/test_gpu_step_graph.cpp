// Whole-step graph replay (train/step/step_graph.h) on the GPU: replayed steps train exactly the
// weights eager steps train, in deterministic mode bit for bit, through a learning rate that
// changes every step, SGD with split weight decay and AdamW's decoupled decay, bf16 and fp16
// with its loss scaler, and a short batch in the middle (run eagerly, the graph kept); the
// trainer gives the same weights and metrics with train.graph "auto" and "off", also across a
// stop and resume. The mode's config checks run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <utility>

#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/schedule.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/step/train_step.h"
#include "hourglass/train/trainer.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

using train::GraphMode;

enum class Opt { Sgd, AdamW };

struct Steps {
  std::vector<float> params;
  std::vector<float> loss_sums;  // each step's, read after it
  int64_t replays = 0;
};

// Twelve steps of a tiny ResNet (batch norm) on a new batch each step, the sixth of 10 rows
// instead of 16, with a one-cycle rate over the run.
Steps train_steps(GraphMode graph, optim::Precision precision, Opt opt,
                  bool arena_weight_cast = true) {
  const Device gpu = Device::gpu(0);
  nn::ModelSpec spec;
  spec.name = "tiny_resnet";
  spec.in_channels = 3;
  spec.height = spec.width = 8;
  spec.num_classes = 4;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 5);
  model->to(gpu);
  model->train();
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::WeightsOnly);
  std::unique_ptr<optim::Optimizer> optimizer;
  if (opt == Opt::Sgd) {
    SgdOptions o;
    o.momentum = 0.9;
    o.nesterov = true;
    o.weight_decay = 5e-4;
    optimizer = std::make_unique<optim::Sgd>(flat, o);
  } else {
    AdamWOptions o;
    o.weight_decay = 0.05;
    optimizer = std::make_unique<optim::AdamW>(flat, o);
  }
  constexpr int kSteps = 12;
  optim::OneCycleSchedule schedule(opt == Opt::Sgd ? 0.2 : 0.01, kSteps, 0.3, 25, 1e4, true);
  train::ExecutionContext context;
  context.device = gpu;
  context.precision = precision;
  context.deterministic = true;
  context.engine.arena_weight_cast = arena_weight_cast;
  train::StepOptions options;
  options.micro_batch = 16;
  options.label_smoothing = 0.1;
  options.schedule = &schedule;
  options.graph = graph;
  train::TrainStep step(*model, *optimizer, context, options);
  Steps out;
  for (int i = 0; i < kSteps; ++i) {
    const int64_t rows = i == 5 ? 10 : 16;
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) labels[size_t(r)] = (r + i) % 4;
    const Tensor x =
        test::f32_tensor(test::random_values(rows * 8 * 8 * 3, 100 + i), {rows, 8, 8, 3}).to(gpu);
    const Tensor y = Tensor::from_vector(labels, {rows}).to(gpu);
    const train::StepSums& sums = step.run(x, y);
    out.loss_sums.push_back(float(sums.loss.item()));
  }
  EXPECT_EQ(optimizer->step_count(), kSteps);
  out.params = flat.params.to_vector<float>();
  out.replays = step.graph() ? step.graph()->replays() : 0;
  ops::set_deterministic(false);
  return out;
}

TEST(GpuStepGraph, ReplayedStepsTrainTheEagerStepsBits) {
  HG_REQUIRE_GPU();
  struct Case {
    const char* name;
    optim::Precision precision;
    Opt opt;
  };
  for (const Case& c : {Case{"bf16 sgd", optim::Precision::BF16, Opt::Sgd},
                        Case{"fp16 adamw", optim::Precision::FP16, Opt::AdamW},
                        Case{"fp32 sgd", optim::Precision::FP32, Opt::Sgd}}) {
    SCOPED_TRACE(c.name);
    const Steps eager = train_steps(GraphMode::Off, c.precision, c.opt);
    const Steps replayed = train_steps(GraphMode::Auto, c.precision, c.opt);
    EXPECT_EQ(eager.replays, 0);
    // Steps 1-2 eager (2 traced), 3 captured (and run), 4-5 replayed, 6 (short) eager, 7-12
    // replayed.
    EXPECT_EQ(replayed.replays, 8);
    EXPECT_EQ(replayed.loss_sums, eager.loss_sums);
    EXPECT_EQ(replayed.params, eager.params) << "replayed steps trained other weights";
  }
}

// The parameter arena converted to the compute dtype once a step (engine.arena_weight_cast, on
// by default) against each layer casting its own weights: the same conversions, so the same
// bits, eager and replayed.
TEST(GpuStepGraph, ArenaWeightCastTrainsThePerLayerCastsBits) {
  HG_REQUIRE_GPU();
  for (auto [precision, opt] : {std::pair{optim::Precision::BF16, Opt::Sgd},
                                std::pair{optim::Precision::FP16, Opt::AdamW}}) {
    SCOPED_TRACE(optim::precision_name(precision));
    for (GraphMode graph : {GraphMode::Off, GraphMode::Auto}) {
      const Steps arena = train_steps(graph, precision, opt, true);
      const Steps per_layer = train_steps(graph, precision, opt, false);
      for (float l : arena.loss_sums) ASSERT_TRUE(std::isfinite(l));
      EXPECT_EQ(arena.loss_sums, per_layer.loss_sums);
      EXPECT_EQ(arena.params, per_layer.params);
    }
  }
}

train::TrainerOptions quiet(const std::string& dir) { return {dir, false}; }

Config trainer_config(const std::string& graph) {
  Config c = Config::parse(R"(
    seed = 4
    device = "gpu:0"
    precision = "bf16"
    deterministic = true
    [model]
    name = "tiny_resnet"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 250, test_size = 100, height = 8, width = 8, channels = 3, classes = 4 }
    workers = 0
    [optim]
    name = "sgd"
    lr = 0.1
    momentum = 0.9
    nesterov = true
    weight_decay = 5e-4
    [schedule]
    name = "one_cycle"
    [train]
    epochs = 2
    batch_size = 32
    label_smoothing = 0.1
  )",
                           "graph.toml");
  c.set_override("train.graph=\"" + graph + "\"");
  return c;
}

// 250 images in batches of 32: seven full batches replayed, the last of 26 eager, each epoch.
TEST(GpuStepGraph, TrainerReplaysTheEagerRunAcrossAStopAndResume) {
  HG_REQUIRE_GPU();
  auto weights = [](train::Trainer& t) { return t.parameters().params.to_vector<float>(); };
  train::Trainer eager(trainer_config("off"), quiet(test::fresh_temp_dir("hourglass_graph_off")));
  const auto eager_history = eager.run();
  EXPECT_EQ(eager.step().graph(), nullptr);
  train::Trainer replayed(trainer_config("auto"),
                          quiet(test::fresh_temp_dir("hourglass_graph_auto")));
  const auto history = replayed.run();
  ASSERT_NE(replayed.step().graph(), nullptr);
  EXPECT_EQ(replayed.step().graph()->replays(), 2 * 7 - 3);  // 2 eager, 1 captured
  EXPECT_EQ(weights(replayed), weights(eager));
  ASSERT_EQ(history.size(), eager_history.size());
  EXPECT_EQ(history.back().train_loss, eager_history.back().train_loss);
  EXPECT_EQ(history.back().test_acc, eager_history.back().test_acc);

  const std::string dir = test::fresh_temp_dir("hourglass_graph_resumed");
  {
    train::TrainerOptions o = quiet(dir);
    o.stop_after_steps = 5;  // mid-epoch
    train::Trainer t(trainer_config("auto"), o);
    t.run();
    ASSERT_TRUE(t.stopped());
  }
  train::TrainerOptions o = quiet(dir);
  o.resume = "auto";
  train::Trainer resumed(trainer_config("auto"), o);
  resumed.run();
  ASSERT_FALSE(resumed.stopped());
  EXPECT_GT(resumed.step().graph()->replays(), 0);
  EXPECT_EQ(weights(resumed), weights(eager)) << "the resumed replayed run differs";
  ops::set_deterministic(false);
}

TEST(StepGraphConfig, TheModeIsAutoOrOff) {
  EXPECT_EQ(train::parse_graph_mode("auto"), GraphMode::Auto);
  EXPECT_EQ(train::parse_graph_mode("off"), GraphMode::Off);
  test::expect_invalid([] { train::parse_graph_mode("on", "--graph"); },
                       {"--graph", "\"auto\" or \"off\"", "\"on\""});
  EXPECT_EQ(train::parse_run_config(Config::parse("", "run.toml")).train.graph, GraphMode::Auto);
  Config c = Config::parse("[train]\ngraph = \"sometimes\"\n", "run.toml");
  test::expect_invalid([&] { train::parse_run_config(c); }, {"train.graph", "sometimes"});
}

TEST(StepGraphConfig, CpuStepsHaveNoGraph) {
  nn::ModelSpec spec;
  spec.name = "mlp";
  auto model = nn::make_model(spec);
  nn::initialize(*model, 1);
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
  optim::Sgd sgd(flat, SgdOptions{});
  train::TrainStep step(*model, sgd, {}, {.micro_batch = 4, .graph = GraphMode::Auto});
  EXPECT_EQ(step.graph(), nullptr) << "a CPU has no graphs to replay";
}

}  // namespace
}  // namespace hg
