// Training on a GPU end to end: the GPU follows the CPU in f32, bf16 and fp16 (with the loss
// scaler) train, checkpoints move between CPU and GPU, and the trainer runs a config with
// device = "gpu:0". GPU tests skip without a GPU; the config checks run everywhere.
#include <gtest/gtest.h>

#include <initializer_list>

#include <cmath>

#include "hourglass/autograd/functions.h"
#include "hourglass/dist/comm.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/mixed_precision.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/trainer.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

nn::ModelSpec tiny_spec() {
  nn::ModelSpec spec;
  spec.name = "tiny_resnet";
  spec.in_channels = 3;
  spec.height = spec.width = 8;
  spec.num_classes = 4;
  return spec;
}

struct Batch {
  Tensor x, labels;
};
Batch fixed_batch(int64_t n = 16) {
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = i % 4;
  return {test::f32_tensor(test::random_values(n * 8 * 8 * 3, 11), {n, 8, 8, 3}),
          Tensor::from_vector(labels, {n})};
}

// Trains the tiny ResNet `steps` SGD steps on one batch on `device` in `precision`; returns
// the losses and the final parameters (on the CPU).
struct Trajectory {
  std::vector<double> losses;
  std::vector<double> params;
};
Trajectory train_tiny(Device device, optim::Precision precision, int steps);

// train_tiny with the thread's engine setting `field` (one of ops::EngineSettings's) set to `on`.
Trajectory train_tiny_with(bool ops::EngineSettings::*field, bool on, Device device,
                           optim::Precision precision, int steps) {
  ops::MathSettings m = ops::math_settings();
  m.engine.*field = on;
  const ops::MathSettingsScope scope(m);
  return train_tiny(device, precision, steps);
}

Trajectory train_tiny(Device device, optim::Precision precision, int steps) {
  auto model = nn::make_model(tiny_spec());
  nn::initialize(*model, 7);
  model->to(device);
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 5e-4;
  optim::Sgd sgd(flat, o);
  std::unique_ptr<optim::LossScaler> scaler;
  if (precision == optim::Precision::FP16) {
    scaler = std::make_unique<optim::LossScaler>(device);
    sgd.set_skip_flag(scaler->found_inf());
  }
  autograd::AutocastGuard guard(optim::apply_precision(precision, device));
  const Batch b = fixed_batch();
  const Tensor x = b.x.to(device), labels = b.labels.to(device);
  Trajectory t;
  for (int i = 0; i < steps; ++i) {
    Tensor loss = fn::cross_entropy(model->forward(x), labels);
    autograd::backward(loss, scaler ? scaler->seed() : Tensor());
    if (scaler) scaler->unscale(flat);
    sgd.step();
    if (scaler) scaler->update();
    sgd.zero_grad();
    t.losses.push_back(loss.item());
  }
  ops::set_allow_tf32(false);
  t.params = test::to_doubles(flat.params);
  return t;
}

TEST(GpuTraining, F32FollowsTheCpu) {
  HG_REQUIRE_GPU();
  const Trajectory cpu = train_tiny(Device::cpu(), optim::Precision::FP32, 5);
  const Trajectory gpu = train_tiny(Device::gpu(0), optim::Precision::FP32, 5);
  EXPECT_TRUE(test::all_close(gpu.losses, cpu.losses, {1e-4, 1e-5}));
  EXPECT_TRUE(test::all_close(gpu.params, cpu.params, {1e-3, 1e-4}));
}

// The fused batch norm + add + ReLU (engine.fused_batch_norm, on by default) against the
// three unfused ops on the GPU: in f32 they differ only in the rounding of the batch norm's
// output before the add, so the runs follow each other as closely as the GPU follows the CPU;
// in bf16 the fused path rounds once where the unfused one rounds twice, so only the first loss
// (one forward pass) is compared, within bf16 rounding.
TEST(GpuTraining, FusedBatchNormTrainsLikeTheUnfusedOps) {
  HG_REQUIRE_GPU();
  constexpr auto kField = &ops::EngineSettings::fused_batch_norm;
  for (auto p : {optim::Precision::FP32, optim::Precision::BF16}) {
    SCOPED_TRACE(optim::precision_name(p));
    const Trajectory fused = train_tiny_with(kField, true, Device::gpu(0), p, 5);
    const Trajectory plain = train_tiny_with(kField, false, Device::gpu(0), p, 5);
    for (double l : fused.losses) ASSERT_TRUE(std::isfinite(l));
    for (double w : fused.params) ASSERT_TRUE(std::isfinite(w));
    if (p == optim::Precision::FP32) {
      EXPECT_TRUE(test::all_close(fused.losses, plain.losses, {1e-4, 1e-5}));
      EXPECT_TRUE(test::all_close(fused.params, plain.params, {1e-3, 1e-4}));
    } else {
      EXPECT_NEAR(fused.losses.front(), plain.losses.front(), 0.03 * plain.losses.front());
    }
  }
}

// An engine setting marked "the same bits": five deterministic steps (so that the
// convolutions' weight gradients repeat too) with `field` on and off give the same losses and
// weights in each of `precisions`.
void expect_same_bits_either_way(bool ops::EngineSettings::*field,
                                 std::initializer_list<optim::Precision> precisions) {
  ops::set_deterministic(true);
  for (auto p : precisions) {
    SCOPED_TRACE(optim::precision_name(p));
    const Trajectory on = train_tiny_with(field, true, Device::gpu(0), p, 5);
    const Trajectory off = train_tiny_with(field, false, Device::gpu(0), p, 5);
    for (double l : on.losses) ASSERT_TRUE(std::isfinite(l));
    EXPECT_EQ(on.losses, off.losses);
    EXPECT_EQ(on.params, off.params);
  }
  ops::set_deterministic(false);
}

// The two parts of a residual block output's gradient summed inside the batch norm's backward
// (engine.fused_gradient_sum, on by default) against an add of their own first: the kernels
// round the sum as the add does.
TEST(GpuTraining, GradientSumInTheBatchNormTrainsBitIdenticallyToTheAdd) {
  HG_REQUIRE_GPU();
  expect_same_bits_either_way(
      &ops::EngineSettings::fused_gradient_sum,
      {optim::Precision::FP32, optim::Precision::BF16, optim::Precision::FP16});
}

// The fused batch norm's backward reading its ReLU mask from the output (engine.relu_mask_bits
// off) rather than from the forward's bits: the same mask.
TEST(GpuTraining, ReluMaskFromTheOutputTrainsBitIdenticallyToTheBits) {
  HG_REQUIRE_GPU();
  expect_same_bits_either_way(&ops::EngineSettings::relu_mask_bits,
                              {optim::Precision::FP32, optim::Precision::BF16});
}

TEST(GpuTraining, LowPrecisionTrainsCloseToF32) {
  HG_REQUIRE_GPU();
  const Trajectory ref = train_tiny(Device::cpu(), optim::Precision::FP32, 30);
  for (auto p : {optim::Precision::TF32, optim::Precision::BF16, optim::Precision::FP16}) {
    SCOPED_TRACE(optim::precision_name(p));
    const Trajectory t = train_tiny(Device::gpu(0), p, 30);
    for (double l : t.losses) ASSERT_TRUE(std::isfinite(l));
    for (double w : t.params) ASSERT_TRUE(std::isfinite(w));
    EXPECT_LT(t.losses.back(), 0.5 * t.losses.front());  // it learns the batch
    // The first loss is one forward pass: within low-precision rounding of f32's.
    EXPECT_NEAR(t.losses.front(), ref.losses.front(), 0.03 * ref.losses.front());
  }
}

TEST(GpuTraining, CheckpointsMoveBetweenGpuAndCpu) {
  HG_REQUIRE_GPU();
  const std::string dir = test::fresh_temp_dir("hourglass_gpu_ckpt");
  auto gpu_model = nn::make_model(tiny_spec());
  nn::initialize(*gpu_model, 9);
  gpu_model->to(Device::gpu(0));
  gpu_model->eval();
  const Batch b = fixed_batch(4);
  autograd::NoGradGuard no_grad;
  const std::vector<double> gpu_out = test::to_doubles(gpu_model->forward(b.x.to(Device::gpu(0))));
  train::save_checkpoint(dir + "/gpu.safetensors", *gpu_model, nullptr, {});

  auto cpu_model = nn::make_model(tiny_spec());  // different (uninitialised) weights
  train::load_model_state(*cpu_model, load_safetensors(dir + "/gpu.safetensors"));
  cpu_model->eval();
  EXPECT_TRUE(test::all_close(cpu_model->forward(b.x), gpu_out, {1e-4, 1e-5}));

  // And back: the CPU model's checkpoint into a fresh GPU model.
  train::save_checkpoint(dir + "/cpu.safetensors", *cpu_model, nullptr, {});
  auto gpu2 = nn::make_model(tiny_spec());
  gpu2->to(Device::gpu(0));
  train::load_model_state(*gpu2, load_safetensors(dir + "/cpu.safetensors"));
  gpu2->eval();
  EXPECT_TRUE(test::all_close(gpu2->forward(b.x.to(Device::gpu(0))), gpu_out, {1e-6, 1e-7}));
}

Config gpu_config(const std::string& precision) {
  Config c = Config::parse(R"(
    seed = 3
    device = "gpu:0"
    [model]
    name = "tiny_resnet"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 256, test_size = 128, height = 8, width = 8, channels = 3, classes = 4 }
    workers = 0
    [optim]
    name = "sgd"
    lr = 0.05
    momentum = 0.9
    nesterov = true
    [train]
    epochs = 3
    batch_size = 32
  )",
                           "gpu.toml");
  c.set_override("precision=\"" + precision + "\"");
  return c;
}

TEST(GpuTraining, TrainerRunsEachPrecisionAndResumesAnFp16Run) {
  HG_REQUIRE_GPU();
  for (const char* p : {"fp32", "tf32", "bf16", "fp16"}) {
    SCOPED_TRACE(p);
    train::Trainer t(gpu_config(p),
                     {test::fresh_temp_dir(std::string("hourglass_gpu_trainer_") + p), false});
    auto h = t.run();
    ASSERT_EQ(h.size(), 3u);
    EXPECT_TRUE(std::isfinite(h.back().train_loss));
    EXPECT_LT(h.back().train_loss, h.front().train_loss);
  }
  // fp16: stop after 5 steps, resume; the loss scale comes back from the checkpoint.
  const std::string dir = test::fresh_temp_dir("hourglass_gpu_trainer_fp16_resume");
  {
    train::TrainerOptions o{dir, false};
    o.stop_after_steps = 5;
    train::Trainer t(gpu_config("fp16"), o);
    t.run();
    ASSERT_TRUE(t.stopped());
    const auto ckpt = train::read_training_checkpoint(t.last_checkpoint());
    EXPECT_FALSE(ckpt.state.loss_scale.empty());
  }
  train::TrainerOptions o{dir, false};
  o.resume = "auto";
  train::Trainer t(gpu_config("fp16"), o);
  auto h = t.run();
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(h.size(), 3u);
}

// Deterministic mode on the GPU: a run stopped and resumed ends with the same bits as one that
// never stopped (and as a second uninterrupted run).
TEST(GpuTraining, DeterministicResumeIsBitIdentical) {
  HG_REQUIRE_GPU();
  auto config = [] {
    Config c = gpu_config("bf16");
    c.set_override("deterministic=true");
    return c;
  };
  auto weights = [](train::Trainer& t) { return t.parameters().params.to_vector<float>(); };
  train::Trainer a(config(), {test::fresh_temp_dir("hourglass_gpu_det_a"), false});
  a.run();
  train::Trainer b(config(), {test::fresh_temp_dir("hourglass_gpu_det_b"), false});
  b.run();
  EXPECT_EQ(weights(a), weights(b)) << "two uninterrupted deterministic runs differ";

  const std::string dir = test::fresh_temp_dir("hourglass_gpu_det_resumed");
  {
    train::TrainerOptions o{dir, false};
    o.stop_after_steps = 11;  // mid-epoch
    train::Trainer t(config(), o);
    t.run();
    ASSERT_TRUE(t.stopped());
  }
  train::TrainerOptions o{dir, false};
  o.resume = "auto";
  train::Trainer c(config(), o);
  c.run();
  ASSERT_FALSE(c.stopped());
  EXPECT_EQ(weights(c), weights(a)) << "the resumed run differs from the uninterrupted one";
  ops::set_deterministic(false);
}

// Data parallelism through NCCL with one rank on one GPU (the path every rank of a multi-GPU run
// takes: gradient buckets all-reduced on the communicator's stream during backward, the update
// waiting for them) trains a deterministic run's weights bit for bit, and its checkpoint
// continues in a plain process.
TEST(GpuTraining, OneNcclRankTrainsAPlainRunsWeights) {
  HG_REQUIRE_GPU();
  if (!nccl_available()) GTEST_SKIP() << "built without NCCL";
  auto config = [] {
    Config c = gpu_config("bf16");
    c.set_override("deterministic=true");
    c.set_override("model.name=\"resnet18\"");  // 45 MB of gradients:
    c.set_override("distributed.bucket_mb=4");  // a dozen buckets
    return c;
  };
  auto weights = [](train::Trainer& t) { return t.parameters().params.to_vector<float>(); };
  train::Trainer plain(config(), {test::fresh_temp_dir("hourglass_gpu_dp_plain"), false});
  const auto plain_history = plain.run();
  auto comm = make_nccl_communicator(LaunchEnv{}, 0);
  const std::string dir = test::fresh_temp_dir("hourglass_gpu_dp_nccl");
  {
    train::TrainerOptions o{dir, false};
    o.communicator = comm.get();
    o.stop_after_steps = 11;  // mid-epoch
    train::Trainer t(config(), o);
    t.run();
    ASSERT_TRUE(t.stopped());
    ASSERT_GT(t.step().gradient_buckets()->size(), 1);
  }
  train::TrainerOptions o{dir, false, "auto"};
  o.communicator = comm.get();
  train::Trainer nccl(config(), o);
  const auto history = nccl.run();
  ASSERT_FALSE(nccl.stopped());
  EXPECT_EQ(weights(nccl), weights(plain)) << "one NCCL rank trained different weights";
  EXPECT_EQ(history.back().test_acc, plain_history.back().test_acc);
  ops::set_deterministic(false);
}

// The dataset on the GPU (data.placement = "device") gives the batches of the host loader bit
// for bit, so a deterministic run trains the same weights and metrics with either placement.
TEST(GpuTraining, DevicePlacementTrainsTheHostPlacementsWeights) {
  HG_REQUIRE_GPU();
  auto run = [](const std::string& placement) {
    Config c = gpu_config("bf16");
    c.set_override("deterministic=true");
    c.set_override("data.augment=true");
    c.set_override("data.placement=\"" + placement + "\"");
    train::Trainer t(c, {test::fresh_temp_dir("hourglass_gpu_place_" + placement), false});
    const std::vector<train::EpochMetrics> history = t.run();
    return std::pair{t.parameters().params.to_vector<float>(), history.back().test_acc};
  };
  const auto host = run("host"), device = run("device");
  EXPECT_EQ(device.first, host.first) << "the placements trained different weights";
  EXPECT_EQ(device.second, host.second);
  ops::set_deterministic(false);
}

TEST(GpuTrainingConfig, Fp16AndTf32NeedAGpuDevice) {
  Config c = gpu_config("fp16");
  c.set_override("device=\"cpu\"");
  test::expect_invalid([&] { train::parse_run_config(c); },
                       {"gpu.toml", "precision", "fp16", "no f16 kernels"});
  Config tf32 = gpu_config("tf32");
  tf32.set_override("device=\"cpu\"");
  test::expect_invalid([&] { train::parse_run_config(tf32); }, {"gpu.toml", "tf32", "GPU"});
  Config bad = gpu_config("fp8");
  test::expect_invalid([&] { train::parse_run_config(bad); }, {"precision", "fp8"});
}

TEST(GpuTrainingConfig, WithoutAPrecisionKeyGpusUseTf32AndTheCpuFp32) {
  // As PyTorch lets cuDNN convolutions use TF32 unless told otherwise.
  Config gpu = Config::parse("device = \"gpu:0\"\n", "gpu.toml");
  EXPECT_EQ(train::parse_run_config(gpu).precision, optim::Precision::TF32);
  EXPECT_NE(
      train::trajectory_config_text(train::parse_run_config(gpu)).find("precision = \"tf32\""),
      std::string::npos);
  Config cpu = Config::parse("device = \"cpu\"\n", "cpu.toml");
  EXPECT_EQ(train::parse_run_config(cpu).precision, optim::Precision::FP32);
  gpu.set_override("precision=\"fp32\"");
  EXPECT_EQ(train::parse_run_config(gpu).precision, optim::Precision::FP32);
}

}  // namespace
}  // namespace hg
