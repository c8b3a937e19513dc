// Weight gradients on the side stream (backend/gpu/side_stream.h, ops::side_stream_depth):
// training with them in flight beside the main stream gives the main stream's weights bit for
// bit, eager and graph-replayed, in bf16, fp16 and f32, with leaf gradients batched or added as
// they arrive, and with recomputed blocks (a backward inside backward); a weight used by two
// convolutions, directly and through an op of its own, gets the same gradient. Every piece of
// side work starts with a kernel that spins for about a millisecond
// (set_side_stream_delay_for_testing), so a read of a gradient before the main stream waited
// for it, or a buffer released while a side kernel still used it, changes the bits instead of
// hiding behind the side stream's usual speed; the allocator's new blocks are NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/autograd/functions.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/recompute_plan.h"
#include "hourglass/train/train_step.h"
#include "support/compare.h"
#include "support/gpu.h"

namespace hg {
namespace {

using train::GraphMode;

// About 1 ms at the H200's clock: long against a small convolution's weight gradient.
constexpr int64_t kDelayCycles = 2'000'000;

// Sets the side stream's depth and the test delay for its lifetime.
class SideStreamScope {
 public:
  explicit SideStreamScope(int depth)
      : previous_(ops::side_stream_depth()), delay_(depth > 0 ? kDelayCycles : 0) {
    ops::set_side_stream_depth(depth);
  }
  ~SideStreamScope() { ops::set_side_stream_depth(previous_); }
  SideStreamScope(const SideStreamScope&) = delete;
  SideStreamScope& operator=(const SideStreamScope&) = delete;

 private:
  int previous_;
  test::SideStreamDelayGuard delay_;
  test::PoisonGuard poison_;
};

struct Case {
  const char* name;
  optim::Precision precision;
  bool adamw = false;
  GraphMode graph = GraphMode::Off;
  bool batched_leaves = true;
  bool recompute = false;
};

struct Result {
  std::vector<float> params;
  std::vector<float> losses;
};

// Eight steps of a small ResNet-18 (basic blocks, downsampling shortcuts) on a new batch each.
Result train(const Case& c, int depth) {
  const SideStreamScope scope(depth);
  const bool batched_before = ops::batched_leaf_gradients();
  ops::set_batched_leaf_gradients(c.batched_leaves);
  const Device gpu = Device::gpu(0);
  nn::ModelSpec spec;
  spec.name = "resnet18";
  spec.in_channels = 3;
  spec.height = spec.width = 16;
  spec.num_classes = 5;
  spec.base_channels = 8;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 3);
  model->to(gpu);
  model->train();
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::WeightsOnly);
  std::unique_ptr<optim::Optimizer> optimizer;
  if (c.adamw) {
    AdamWOptions o;
    o.lr = 0.01;
    o.weight_decay = 0.05;
    optimizer = std::make_unique<optim::AdamW>(flat, o);
  } else {
    SgdOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    o.weight_decay = 5e-4;
    optimizer = std::make_unique<optim::Sgd>(flat, o);
  }
  train::ExecutionContext context;
  context.device = gpu;
  context.precision = c.precision;
  context.deterministic = true;
  train::StepOptions options;
  options.micro_batch = 16;
  options.graph = c.graph;
  if (c.recompute)
    for (const auto& [block, m] : nn::recompute_candidates(*model))
      options.recompute.push_back(block);
  train::TrainStep step(*model, *optimizer, context, options);
  Result out;
  for (int i = 0; i < 8; ++i) {
    std::vector<int64_t> labels(16);
    for (int64_t r = 0; r < 16; ++r) labels[size_t(r)] = (r + i) % 5;
    const Tensor x =
        test::f32_tensor(test::random_values(16 * 16 * 16 * 3, 40 + i), {16, 16, 16, 3}).to(gpu);
    const Tensor y = Tensor::from_vector(labels, {16}).to(gpu);
    out.losses.push_back(float(step.run(x, y).loss.item()));
  }
  if (c.graph == GraphMode::Auto) EXPECT_GT(step.graph() ? step.graph()->replays() : 0, 0);
  out.params = flat.params.to_vector<float>();
  ops::set_deterministic(false);
  ops::set_batched_leaf_gradients(batched_before);
  return out;
}

TEST(GpuSideStream, WeightGradientsBesideTheMainStreamTrainTheSameBits) {
  HG_REQUIRE_GPU();
  using P = optim::Precision;
  for (const Case& c : {
           Case{"bf16 sgd eager", P::BF16},
           Case{"bf16 sgd replayed", P::BF16, false, GraphMode::Auto},
           Case{"fp16 adamw replayed", P::FP16, true, GraphMode::Auto},
           Case{"fp32 sgd eager", P::FP32},
           Case{"fp32 sgd replayed", P::FP32, false, GraphMode::Auto},
           Case{"bf16 leaves added as they arrive", P::BF16, false, GraphMode::Off, false},
           Case{"fp32 leaves added as they arrive", P::FP32, false, GraphMode::Auto, false},
           Case{"bf16 recomputed blocks", P::BF16, false, GraphMode::Off, true, true},
       }) {
    SCOPED_TRACE(c.name);
    const Result main_stream = train(c, 0);
    for (float l : main_stream.losses) ASSERT_TRUE(std::isfinite(l));
    for (int depth : {1, 3}) {
      SCOPED_TRACE("depth " + std::to_string(depth));
      const Result beside = train(c, depth);
      EXPECT_EQ(beside.losses, main_stream.losses);
      EXPECT_EQ(beside.params, main_stream.params);
    }
  }
}

// d/dw of sum(conv(relu(conv(x, v)), v)) for v = w (a leaf: its slot gets two gradients) and
// v = 2w (an op's output: its gradient is the sum of two, then goes through the op).
std::vector<float> shared_weight_gradient(bool through_op, int depth) {
  const SideStreamScope scope(depth);
  const Device gpu = Device::gpu(0);
  Tensor w = test::f32_tensor(test::random_values(8 * 3 * 3 * 8, 7), {8, 3, 3, 8}).to(gpu);
  w.set_requires_grad(true);
  Tensor x = test::f32_tensor(test::random_values(4 * 12 * 12 * 8, 8), {4, 12, 12, 8}).to(gpu);
  x.set_requires_grad(true);  // both convolutions compute an input gradient
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Tensor v = through_op ? fn::mul_scalar(w, 2.0) : w;
  const Tensor h = fn::relu(fn::conv2d(x, v, Tensor(), p));
  autograd::backward(fn::sum(fn::conv2d(h, v, Tensor(), p)));
  return w.grad().to_vector<float>();
}

TEST(GpuSideStream, AWeightUsedTwiceGetsTheSameGradient) {
  HG_REQUIRE_GPU();
  for (bool through_op : {false, true}) {
    SCOPED_TRACE(through_op ? "through an op" : "a leaf");
    const std::vector<float> main_stream = shared_weight_gradient(through_op, 0);
    for (float g : main_stream) ASSERT_TRUE(std::isfinite(g));
    EXPECT_EQ(shared_weight_gradient(through_op, 2), main_stream);
  }
}

}  // namespace
}  // namespace hg
