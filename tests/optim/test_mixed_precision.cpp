// Precision policies, autocast and the dynamic loss scaler, on the CPU (the GPU runs the same
// code paths through tests/train/test_gpu_training.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "hourglass/autograd/functions.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/backend.h"
#include "hourglass/optim/mixed_precision.h"
#include "hourglass/optim/sgd.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/gpu.h"

namespace hg {
namespace {

using optim::Precision;

TEST(Precision, ParsesTheFourNamesAndRejectsOthers) {
  EXPECT_EQ(optim::parse_precision("fp32"), Precision::FP32);
  EXPECT_EQ(optim::parse_precision("tf32"), Precision::TF32);
  EXPECT_EQ(optim::parse_precision("bf16"), Precision::BF16);
  EXPECT_EQ(optim::parse_precision("fp16"), Precision::FP16);
  test::expect_invalid([] { optim::parse_precision("fp8", "run.toml: precision"); },
                       {"run.toml: precision", "fp8", "bf16"});
}

TEST(Precision, Tf32AndFp16OnTheCpuAreRefusedWithTheRemedy) {
  test::expect_invalid([] { optim::apply_precision(Precision::TF32, Device::cpu()); },
                       {"tf32", "GPU tensor cores", "fp32"});
  test::expect_invalid([] { optim::apply_precision(Precision::FP16, Device::cpu()); },
                       {"fp16", "no f16 kernels", "bf16"});
  const auto policy = optim::apply_precision(Precision::FP32, Device::cpu());
  EXPECT_FALSE(policy.enabled);
  EXPECT_FALSE(ops::allow_tf32());
  EXPECT_EQ(optim::autocast_policy(Precision::BF16).compute, DType::BF16);
  EXPECT_EQ(optim::autocast_policy(Precision::FP16).compute, DType::F16);
}

TEST(Cast, GradientFlowsBackInTheSourceDtype) {
  Tensor x = Tensor::from_vector<float>({1.5f, -2.0f, 0.25f}, {3});
  x.set_requires_grad(true);
  Tensor y = fn::cast(x, DType::F64);
  EXPECT_EQ(y.dtype(), DType::F64);
  autograd::backward(fn::sum(fn::mul(y, y)));  // d/dx sum(x^2) = 2x
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::F32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3.0f, -4.0f, 0.5f}));
  EXPECT_TRUE(fn::cast(x, DType::F32).same_storage(x));  // no copy when the dtype matches
}

// A parameter's copy in the compute dtype (AutocastPolicy::copies, filled by the training step
// from the arena) stands in for its cast: the op computes with the copy's values (a stale copy
// shows through), the output and the f32 parameter's gradient are the cast's bit for bit, and
// an operand without a copy (the bias here) is cast as before. On the CPU, f64 parameters
// computing in f32 stand in for f32 ones computing in bf16.
TEST(Autocast, ParameterCopiesStandInForTheCast) {
  const Tensor x = Tensor::from_vector<float>({0.5f, -1.25f, 2.0f, 0.75f, 1.0f, -0.5f}, {2, 3});
  const std::vector<double> w0 = {0.3, -0.7, 1.1, 0.2, 0.9, -1.3}, b0 = {0.1, -0.2};
  struct Result {
    std::vector<double> y, dw, db;
  };
  auto run = [&](bool with_copies, bool stale) {
    auto leaf = [](const std::vector<double>& v, const Shape& shape) {
      Tensor t = Tensor::from_vector(v, shape);
      t.set_requires_grad(true);
      t.set_grad(Tensor::zeros(shape, DType::F64));
      return t;
    };
    Tensor w = leaf(w0, {2, 3});
    Tensor b = leaf(b0, {2});
    Tensor copy = w.to(DType::F32).view({6});
    if (stale) copy.fill_(0.0);
    autograd::CastCopies copies{{w.impl_ptr()->id, copy}};
    autograd::AutocastGuard guard(
        autograd::AutocastPolicy{true, DType::F32, with_copies ? &copies : nullptr});
    Tensor y = fn::linear(x, w, b);
    EXPECT_EQ(y.dtype(), DType::F32);
    autograd::backward(fn::sum(fn::mul(y, y)));
    EXPECT_EQ(w.grad().dtype(), DType::F64);
    return Result{test::to_doubles(y), test::to_doubles(w.grad()), test::to_doubles(b.grad())};
  };
  const Result cast = run(false, false), copied = run(true, false);
  EXPECT_EQ(copied.y, cast.y);
  EXPECT_EQ(copied.dw, cast.dw);
  EXPECT_EQ(copied.db, cast.db);
  // A zeroed copy: the output is the bias alone, so the op read the copy, not the parameter.
  const Result stale = run(true, true);
  EXPECT_EQ(stale.y, (std::vector<double>{double(float(b0[0])), double(float(b0[1])),
                                          double(float(b0[0])), double(float(b0[1]))}));
  for (double d : stale.dw) EXPECT_TRUE(std::isfinite(d));
}

// Autocast to bf16 on a GPU and on the CPU (where it has bf16 instructions): convolutions and
// the linear layer compute in bf16, the loss in f32, and the f32 master weights get f32
// gradients close to an f32 CPU run's.
TEST(Autocast, MatrixOpsComputeInBf16AndGradientsReturnToF32) {
  std::vector<Device> devices;
  if (backend_for(Device::cpu()).compute_dtype_problem(DType::BF16).empty())
    devices.push_back(Device::cpu());
  if (test::gpu_available()) devices.push_back(Device::gpu(0));
  if (devices.empty()) GTEST_SKIP() << "no GPU, and the CPU has no bf16 instructions";
  nn::ModelSpec spec;
  spec.name = "tiny_resnet";
  spec.in_channels = 3;
  spec.height = spec.width = 8;
  spec.num_classes = 4;
  auto run = [&](Device device, bool autocast) {
    auto model = nn::make_model(spec);
    nn::initialize(*model, 3);
    model->to(device);
    FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
    Tensor x = test::f32_tensor(test::random_values(8 * 8 * 8 * 3, 5), {8, 8, 8, 3}).to(device);
    Tensor labels = Tensor::from_vector<int64_t>({1, 3, 0, 2, 1, 1, 0, 3}, {8}).to(device);
    autograd::AutocastGuard guard(autocast ? autograd::AutocastPolicy{true, DType::BF16}
                                           : autograd::AutocastPolicy{});
    Tensor logits = model->forward(x);
    EXPECT_EQ(logits.dtype(), autocast ? DType::BF16 : DType::F32);
    Tensor loss = fn::cross_entropy(logits, labels);
    EXPECT_EQ(loss.dtype(), DType::F32);
    autograd::backward(loss);
    EXPECT_EQ(flat.grads.dtype(), DType::F32);
    return test::to_doubles(flat.grads);
  };
  const std::vector<double> ref = run(Device::cpu(), false);
  for (Device device : devices) {
    SCOPED_TRACE(device.str());
    const std::vector<double> bf16 = run(device, true);
    ASSERT_EQ(ref.size(), bf16.size());
    // bf16 keeps 8 mantissa bits, and batch-norm's backward over a batch of 8 cancels terms, so
    // single elements can be off by several percent of the largest gradient: the check is on the
    // whole gradient vector, its relative L2 error and its direction.
    double diff = 0, norm = 0, dot = 0, norm_bf16 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_TRUE(std::isfinite(bf16[i])) << "gradient " << i;
      diff += (bf16[i] - ref[i]) * (bf16[i] - ref[i]);
      norm += ref[i] * ref[i];
      dot += bf16[i] * ref[i];
      norm_bf16 += bf16[i] * bf16[i];
    }
    // Measured: 7.5 % and 0.997 on an H200, 7.5 % and 0.997 on an AVX-512 BF16 CPU (Zen 4).
    EXPECT_LT(std::sqrt(diff / norm), 0.12);
    EXPECT_GT(dot / std::sqrt(norm * norm_bf16), 0.99);
  }
}

TEST(LossScaler, SeedsBackwardWithTheScaleAndUnscalesTheGradients) {
  Tensor w = Tensor::from_vector<float>({0.5f, -1.0f}, {2});
  w.set_requires_grad(true);
  FlatParameters flat;
  flat.params = w;
  flat.grads = Tensor::zeros({2});
  w.set_grad(flat.grads);
  optim::LossScaler scaler(Device::cpu(), {1024.0, 2.0, 0.5, 3});
  autograd::backward(fn::sum(fn::mul(w, w)), scaler.seed());  // grad 2w, scaled
  EXPECT_EQ(flat.grads.to_vector<float>(), (std::vector<float>{1024.0f, -2048.0f}));
  scaler.unscale(flat);
  EXPECT_EQ(flat.grads.to_vector<float>(), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(scaler.found_inf().item(), 0.0);
}

TEST(LossScaler, OverflowSkipsTheStepAndBacksOffThenCleanStepsGrow) {
  FlatParameters flat;
  flat.params = Tensor::from_vector<float>({1.0f, 2.0f, 3.0f}, {3});
  flat.grads = Tensor::zeros({3});
  flat.decay_count = 3;
  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  optim::Sgd sgd(flat, o);
  optim::LossScaler scaler(Device::cpu(), {8.0, 2.0, 0.5, 2});
  sgd.set_skip_flag(scaler.found_inf());
  auto step = [&](std::vector<float> scaled_grads) {
    flat.grads.copy_(Tensor::from_vector(scaled_grads, {3}));
    scaler.unscale(flat);
    sgd.step();
    scaler.update();
    sgd.zero_grad();
  };
  step({8.0f, INFINITY, 8.0f});  // overflow: skipped, scale 8 -> 4
  EXPECT_EQ(flat.params.to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(scaler.scale(), 4.0);
  EXPECT_EQ(scaler.found_inf().item(), 0.0);  // cleared for the next step
  step({4.0f, 4.0f, NAN});                    // NaN too: skipped, 4 -> 2
  EXPECT_EQ(flat.params.to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(scaler.scale(), 2.0);
  step({2.0f, 2.0f, 2.0f});  // clean: unscaled grads 1, applied
  EXPECT_EQ(flat.params.to_vector<float>(), (std::vector<float>{0.9f, 1.9f, 2.9f}));
  EXPECT_EQ(scaler.scale(), 2.0);
  step({2.0f, 2.0f, 2.0f});  // second clean step: interval 2 reached, grows
  EXPECT_EQ(scaler.scale(), 4.0);
  EXPECT_EQ(scaler.state().to_vector<float>()[2], 0.0f);
}

TEST(LossScaler, StateRoundTripsThroughLoadState) {
  optim::LossScaler a(Device::cpu());
  a.load_state(Tensor::from_vector<double>({512.0, 0.0, 7.0}, {3}));
  EXPECT_EQ(a.scale(), 512.0);
  EXPECT_EQ(a.state().to_vector<float>(), (std::vector<float>{512.0f, 0.0f, 7.0f}));
  test::expect_invalid([&] { a.load_state(Tensor::zeros({2})); }, {"loss scaler state", "3"});
}

// bf16 on the CPU runs where the CPU has bf16 instructions and is refused, naming them, where
// it has not (whichever this machine is, one of the two branches is checked).
TEST(Precision, Bf16OnTheCpuFollowsTheCpusInstructions) {
  const std::string problem = backend_for(Device::cpu()).compute_dtype_problem(DType::BF16);
  if (problem.empty()) {
    EXPECT_TRUE(optim::apply_precision(Precision::BF16, Device::cpu()).enabled);
  } else {
    EXPECT_NE(problem.find("AVX-512 BF16"), std::string::npos) << problem;
    test::expect_invalid([] { optim::apply_precision(Precision::BF16, Device::cpu()); },
                         {"bf16", "AVX-512 BF16", "fp32"});
  }
  EXPECT_NE(backend_for(Device::cpu()).compute_dtype_problem(DType::F16), "");
  EXPECT_EQ(backend_for(Device::cpu()).compute_dtype_problem(DType::F32), "");
}

}  // namespace
}  // namespace hg
