// The training step on real inputs: what one step computes (sums, the update, micro-batches,
// clipping, mixup and cutmix and their draws), the hooks later layers attach to (gradients
// ready, phases, the device-work wrapper), the execution context it installs only for its own
// work, and its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hourglass/autograd/functions.h"
#include "hourglass/device/allocator.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/obs/op_profile_report.h"
#include "hourglass/ops/op_profile.h"
#include "hourglass/ops/ops.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/step/train_step.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace hg {
namespace {

using train::PhaseEdge;
using train::StepPhase;

struct Rig {
  std::shared_ptr<nn::Module> model;
  FlatParameters flat;
  std::unique_ptr<optim::Sgd> sgd;
  Tensor images, labels;  // a batch of 24 rows
};

Rig make_rig(const std::string& model_name, uint64_t seed = 5) {
  nn::ModelSpec spec;
  spec.name = model_name;  // "mlp": no batch norm; "small_cnn": batch norm
  spec.in_channels = 1;
  spec.height = spec.width = model_name == "mlp" ? 6 : 12;
  spec.hidden = {16};
  spec.num_classes = 4;
  Rig r;
  r.model = nn::make_model(spec);
  nn::initialize(*r.model, seed);
  r.model->train();
  r.flat = nn::build_parameter_arena(*r.model, nn::DecayScope::All);
  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  r.sgd = std::make_unique<optim::Sgd>(r.flat, o);
  const int64_t n = 24, pixels = spec.height * spec.width;
  r.images = test::f32_tensor(test::random_values(n * pixels, 21), {n, spec.height, spec.width, 1});
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back((i * 7 + 3) % spec.num_classes);
  r.labels = Tensor::from_vector(labels, {n});
  return r;
}

std::vector<double> weights(const Rig& r) { return test::to_doubles(r.flat.params); }

TEST(TrainStep, SumsAreTheBatchsLossAndCorrectCountAndTheUpdateIsSgds) {
  Rig r = make_rig("mlp");
  // What the step must do, written out: loss, backward, SGD, on a twin model.
  Rig twin = make_rig("mlp");
  Tensor logits = twin.model->forward(twin.images);
  Tensor loss = fn::cross_entropy(logits, twin.labels, 0.0);
  const double expected_loss_sum = loss.item() * 24.0;
  const double expected_correct = ops::count_correct(logits, twin.labels).item();
  autograd::backward(loss);
  twin.sgd->step();

  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = 24});
  const train::StepSums& sums = step.run(r.images, r.labels);
  EXPECT_NEAR(sums.loss.item(), expected_loss_sum, 1e-4 * expected_loss_sum);
  EXPECT_EQ(sums.correct.item(), expected_correct);
  EXPECT_EQ(r.sgd->step_count(), 1);
  EXPECT_TRUE(test::all_close(weights(r), weights(twin), {1e-6, 1e-7}));
  for (double g : test::to_doubles(r.flat.grads)) ASSERT_EQ(g, 0.0) << "gradients are zeroed";
}

// engine.release_gradients (on by default): between steps the gradient arena holds no memory,
// and the weights are the same bits as with the arena kept and zeroed.
TEST(TrainStep, ReleasedGradientsHoldNoMemoryBetweenStepsAndTrainTheSameBits) {
  Allocator& cpu = allocator_for(Device::cpu());
  Rig kept = make_rig("small_cnn"), released = make_rig("small_cnn");
  train::ExecutionContext keep_context;
  keep_context.engine.release_gradients = false;
  train::TrainStep a(*kept.model, *kept.sgd, keep_context, {.micro_batch = 8});
  train::TrainStep b(*released.model, *released.sgd, {}, {.micro_batch = 8});
  ASSERT_TRUE(b.context().engine.release_gradients);
  for (int i = 0; i < 3; ++i) {
    a.run(kept.images, kept.labels);
    b.run(released.images, released.labels);
  }
  EXPECT_EQ(weights(kept), weights(released));
  // The gradients' storage was given back: touching it takes their bytes again, zeroed.
  const size_t held = cpu.stats().in_use;
  (void)released.flat.grads.data_ptr();
  EXPECT_GE(cpu.stats().in_use, held + size_t(released.flat.grads.nbytes()));
  for (double g : test::to_doubles(released.flat.grads)) ASSERT_EQ(g, 0.0);
  // The kept ones were zeroed in place.
  const size_t before = cpu.stats().in_use;
  (void)kept.flat.grads.data_ptr();
  EXPECT_EQ(cpu.stats().in_use, before);
  for (double g : test::to_doubles(kept.flat.grads)) ASSERT_EQ(g, 0.0);
}

TEST(TrainStep, MicroBatchesGiveTheWholeBatchsStep) {
  // No batch norm: micro-batches of 5 (24 = 5+5+5+5+4... split evenly as 24*k/5) must give the
  // whole batch's gradient up to summation order.
  Rig whole = make_rig("mlp"), parts = make_rig("mlp");
  train::TrainStep a(*whole.model, *whole.sgd, {}, {.micro_batch = 24});
  train::TrainStep b(*parts.model, *parts.sgd, {}, {.micro_batch = 5});
  for (int i = 0; i < 3; ++i) {
    const double la = a.run(whole.images, whole.labels).loss.item();
    const double lb = b.run(parts.images, parts.labels).loss.item();
    EXPECT_NEAR(la, lb, 1e-5 * std::abs(la));
  }
  EXPECT_EQ(b.micro_batch_plan().micro_batches(24), 5);
  EXPECT_TRUE(test::all_close(weights(parts), weights(whole), {1e-5, 1e-6}));
}

TEST(TrainStep, ClippingBoundsTheUpdateByTheGlobalNorm) {
  // Plain SGD without momentum: the update is lr * clipped gradient, so its norm is at most
  // lr * max_norm; with a huge max_norm it equals the unclipped update.
  const double max_norm = 1e-3;
  auto update_norm = [&](double clip) {
    Rig r = make_rig("mlp");
    r.sgd = std::make_unique<optim::Sgd>(r.flat, SgdOptions{.lr = 1.0});
    const std::vector<double> before = weights(r);
    train::TrainStep step(*r.model, *r.sgd, {}, {.clip_grad_norm = clip, .micro_batch = 24});
    step.run(r.images, r.labels);
    const std::vector<double> after = weights(r);
    double sq = 0;
    for (size_t i = 0; i < after.size(); ++i) sq += (after[i] - before[i]) * (after[i] - before[i]);
    return std::sqrt(sq);
  };
  const double unclipped = update_norm(0);
  ASSERT_GT(unclipped, 10 * max_norm) << "the test needs a gradient larger than max_norm";
  EXPECT_NEAR(update_norm(max_norm), max_norm, 1e-3 * max_norm);
  EXPECT_NEAR(update_norm(1e6), unclipped, 1e-6 * unclipped);
}

TEST(TrainStep, HooksSeeFinalGradientsPhasesInOrderAndWrapTheDeviceWork) {
  Rig r = make_rig("small_cnn");
  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = 12});
  std::vector<std::string> events;
  double grad_norm_at_hook = 0;
  int64_t bucket_size = 0;
  step.hooks().phase = [&](StepPhase p, PhaseEdge e) {
    events.push_back(std::string(train::step_phase_name(p)) + (e == PhaseEdge::Begin ? "+" : "-"));
  };
  step.hooks().gradients_ready = [&](train::GradientBucket& b) {
    events.push_back("ready");
    bucket_size = b.grads.numel();
    grad_norm_at_hook = std::sqrt(ops::sum_squares(b.grads).item());
  };
  int wrapped = 0;
  step.hooks().device_work = [&](const std::function<void()>& issue) {
    ++wrapped;
    events.push_back("work+");
    issue();
    events.push_back("work-");
  };
  step.run(r.images, r.labels);
  const std::vector<std::string> expected = {
      "work+",     "forward+",  "forward-", "backward+", "backward-", "forward+", "forward-",
      "backward+", "backward-", "ready",    "update+",   "update-",   "work-"};
  EXPECT_EQ(events, expected);
  EXPECT_EQ(wrapped, 1);
  EXPECT_EQ(bucket_size, r.flat.grads.numel()) << "one bucket: the whole arena";
  EXPECT_GT(grad_norm_at_hook, 0.0) << "the hook sees the accumulated gradients";
  EXPECT_EQ(r.sgd->step_count(), 1);
}

TEST(TrainStep, ProfiledOpsCarryTheirPhase) {
  Rig r = make_rig("small_cnn");
  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = 24});
  ops::OpProfiler profiler(Device::cpu());
  profiler.install();
  step.run(r.images, r.labels);
  profiler.uninstall();
  EXPECT_STREQ(ops::profile_phase(), "") << "the phase ends with the step";
  std::map<std::string, std::set<std::string>> phases;  // phase -> its top-level ops
  for (const ops::OpEvent& e : profiler.events())
    if (e.depth == 0) phases[e.phase].insert(e.name);
  EXPECT_TRUE(phases["forward"].count("conv2d")) << "convolutions run forward";
  EXPECT_TRUE(phases["forward"].count("cross_entropy"));
  EXPECT_FALSE(phases["forward"].count("conv2d_backward"));
  EXPECT_TRUE(phases["backward"].count("conv2d_backward"));
  EXPECT_TRUE(phases["backward"].count("cross_entropy_backward"));
  EXPECT_FALSE(phases["backward"].count("sgd_step"));
  EXPECT_TRUE(phases["update"].count("sgd_step"));
  const obs::OpProfileSummary s = obs::summarize(profiler, DevicePeaks{});
  std::vector<std::string> order;
  double total = 0;
  for (const obs::PhaseTotal& p : s.phases) {
    order.push_back(p.phase);
    total += p.ms;
  }
  ASSERT_GE(order.size(), 3u);
  const std::vector<std::string> named(order.end() - 3, order.end());
  EXPECT_EQ(named, (std::vector<std::string>{"forward", "backward", "update"}));
  EXPECT_NEAR(total, s.top_level_ms, 1e-9 * (1 + s.top_level_ms));
}

TEST(TrainStep, InstallsItsContextOnlyForItsOwnWork) {
  Rig r = make_rig("mlp");
  train::ExecutionContext context;
  context.deterministic = true;
  train::TrainStep step(*r.model, *r.sgd, context, {.micro_batch = 24});
  bool deterministic_inside = false;
  step.hooks().device_work = [&](const std::function<void()>& issue) {
    deterministic_inside = ops::deterministic();
    issue();
  };
  ASSERT_FALSE(ops::deterministic());
  step.run(r.images, r.labels);
  EXPECT_TRUE(deterministic_inside);
  EXPECT_FALSE(ops::deterministic()) << "the thread's settings are restored after the step";
}

TEST(TrainStep, BatchNormSnapshotIsOneBlockOfTheArena) {
  Rig r = make_rig("small_cnn");
  ASSERT_TRUE(r.flat.buffers.defined());
  int64_t total = 0;
  for (const auto& [name, t] : r.model->named_buffers()) {
    EXPECT_TRUE(t.same_storage(r.flat.buffers)) << name << " lives in the buffer block";
    total += t.numel();
  }
  EXPECT_EQ(total, r.flat.buffers.numel());
  // Running statistics move with a training step, and the handles see the block.
  const std::vector<double> before = test::to_doubles(r.flat.buffers);
  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = 24});
  step.run(r.images, r.labels);
  EXPECT_NE(test::to_doubles(r.flat.buffers), before);
}

TEST(TrainStep, ForwardBackwardAccumulatesWithoutUpdating) {
  Rig r = make_rig("mlp");
  const std::vector<double> before = weights(r);
  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = 24});
  step.forward_backward(r.images, r.labels);
  EXPECT_EQ(weights(r), before);
  EXPECT_EQ(r.sgd->step_count(), 0);
  double sq = 0;
  for (double g : test::to_doubles(r.flat.grads)) sq += g * g;
  EXPECT_GT(sq, 0.0);
}

TEST(TrainStep, BadBatchesAndOptionsAreRefusedNamingThem) {
  Rig r = make_rig("mlp");
  train::TrainStep step(*r.model, *r.sgd, {}, {.micro_batch = 24});
  test::expect_invalid([&] { step.run(r.images, r.labels.narrow(0, 0, 10)); }, {"same number"});
  test::expect_invalid(
      [&] { train::TrainStep s(*r.model, *r.sgd, {}, {.clip_grad_norm = -1, .micro_batch = 4}); },
      {"clip_grad_norm"});
  test::expect_invalid(
      [&] {
        train::ExecutionContext c;
        c.precision = optim::Precision::FP16;
        train::TrainStep s(*r.model, *r.sgd, c, {.micro_batch = 4});
      },
      {"fp16", "no f16 kernels"});
  test::expect_invalid([&] { train::TrainStep s(*r.model, *r.sgd, {}, {.micro_batch = 0}); },
                       {"micro-batch"});
}

// Mixup's lam over 20,000 steps against Beta(alpha, alpha)'s distribution function in closed
// form (the arcsine law for 1/2, uniform for 1, 3x^2 - 2x^3 for 2): the Kolmogorov-Smirnov
// distance stays under 0.015 (its 0.1% critical value at this size is 0.0138).
TEST(BatchMixing, MixupDrawsLamFromTheBetaDistribution) {
  struct Law {
    double alpha;
    double (*cdf)(double);
  };
  for (const Law& law : {Law{0.5, [](double x) { return 2.0 / M_PI * std::asin(std::sqrt(x)); }},
                         Law{1.0, [](double x) { return x; }},
                         Law{2.0, [](double x) { return x * x * (3.0 - 2.0 * x); }}}) {
    SCOPED_TRACE(testing::Message() << "alpha " << law.alpha);
    const train::BatchMixing mixup{.mixup_alpha = law.alpha};
    std::vector<double> lams;
    for (int64_t step = 0; step < 20000; ++step) {
      const train::MixDraw d = train::draw_batch_mix(mixup, 3, step, 32, 32);
      ASSERT_FALSE(d.cutmix);
      ASSERT_EQ(d.outside, d.inside);
      ASSERT_EQ(d.outside, float(d.lam));
      ASSERT_EQ(d.y1 - d.y0, 0);
      lams.push_back(d.lam);
    }
    std::sort(lams.begin(), lams.end());
    double ks = 0;
    for (size_t i = 0; i < lams.size(); ++i) {
      const double f = law.cdf(lams[i]), n = double(lams.size());
      ks = std::max({ks, std::abs(f - double(i) / n), std::abs(f - double(i + 1) / n)});
    }
    EXPECT_LT(ks, 0.015);
    EXPECT_GT(lams.front(), 0.0);
    EXPECT_LT(lams.back(), 1.0);
  }
}

// Cutmix's box lies in the image and lam is the share outside it; mix_prob and mix_switch_prob
// are the shares of steps that mix and of mixing steps that cut; a draw depends on the seed and
// the step alone.
TEST(BatchMixing, CutmixBoxesAndTheProbabilitiesOfMixingAndSwitching) {
  const int64_t h = 28, w = 20;
  const train::BatchMixing both{
      .mixup_alpha = 0.2, .cutmix_alpha = 1.0, .prob = 0.6, .switch_prob = 0.25};
  int64_t mixed = 0, cut = 0, nonempty = 0;
  const int64_t steps = 20000;
  for (int64_t step = 0; step < steps; ++step) {
    const train::MixDraw d = train::draw_batch_mix(both, 8, step, h, w);
    const train::MixDraw again = train::draw_batch_mix(both, 8, step, h, w);
    ASSERT_EQ(d.lam, again.lam);
    ASSERT_EQ(d.y0, again.y0);
    ASSERT_EQ(d.x1, again.x1);
    if (d.lam == 1.0 && !d.cutmix) {
      ASSERT_EQ(d.outside, 1.0f);
      ASSERT_EQ(d.inside, 1.0f);
      continue;
    }
    ++mixed;
    if (!d.cutmix) continue;
    ++cut;
    ASSERT_EQ(d.outside, 1.0f);
    ASSERT_EQ(d.inside, 0.0f);
    ASSERT_TRUE(0 <= d.y0 && d.y0 <= d.y1 && d.y1 <= h && 0 <= d.x0 && d.x0 <= d.x1 && d.x1 <= w);
    ASSERT_EQ(d.lam, 1.0 - double((d.y1 - d.y0) * (d.x1 - d.x0)) / double(h * w));
    nonempty += d.lam < 1.0;
  }
  // Binomial shares within about 5 standard deviations.
  EXPECT_NEAR(double(mixed) / double(steps), 0.6, 0.02);
  EXPECT_NEAR(double(cut) / double(mixed), 0.25, 0.025);
  EXPECT_GT(nonempty, cut / 2);
  int64_t differ = 0;
  for (int64_t step = 0; step < 100; ++step)
    differ += train::draw_batch_mix(both, 8, step, h, w).lam !=
              train::draw_batch_mix(both, 9, step, h, w).lam;
  EXPECT_GT(differ, 50);
  EXPECT_EQ(train::draw_batch_mix({}, 8, 5, h, w).lam, 1.0);  // off: no mixing
}

// With mixup and cutmix, each step trains on its draw: the batch mixed with itself reversed
// (built here in float64 from the draw) and the loss lam * CE(own) + (1 - lam) * CE(partner's),
// label smoothing on both; a twin model trained that way by hand ends at the same weights, and
// micro-batches give the whole batch's step (the batch is mixed before it is split).
TEST(TrainStep, MixupAndCutmixTrainOnTheMixedBatchAndTheMixedLoss) {
  Rig r = make_rig("mlp"), twin = make_rig("mlp"), parts = make_rig("mlp");
  train::ExecutionContext context;
  context.seed = 4;
  train::StepOptions o{.label_smoothing = 0.1, .micro_batch = 24};
  o.mixing = {.mixup_alpha = 0.4, .cutmix_alpha = 1.0};
  train::TrainStep step(*r.model, *r.sgd, context, o);
  o.micro_batch = 5;
  train::TrainStep split(*parts.model, *parts.sgd, context, o);
  const int64_t n = 24, h = 6, w = 6;
  const std::vector<double> pixels = test::to_doubles(r.images);
  const std::vector<int64_t> labels = r.labels.to_vector<int64_t>();
  std::vector<int64_t> reversed(labels.rbegin(), labels.rend());
  int kinds[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    const double loss_sum = step.run(r.images, r.labels).loss.item();
    split.run(parts.images, parts.labels);
    const train::MixDraw d = step.mix_draw();
    ++kinds[d.cutmix ? 1 : 0];
    std::vector<double> mixed(pixels.size());
    for (int64_t b = 0; b < n; ++b)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const bool in = y >= d.y0 && y < d.y1 && x >= d.x0 && x < d.x1;
          const double t = in ? d.inside : d.outside;
          const size_t at = size_t((b * h + y) * w + x);
          mixed[at] = t * pixels[at] + (1 - t) * pixels[size_t(((n - 1 - b) * h + y) * w + x)];
        }
    const Tensor logits = twin.model->forward(test::f32_tensor(mixed, {n, h, w, 1}));
    const Tensor own = fn::cross_entropy(logits, r.labels, 0.1);
    const Tensor partner = fn::cross_entropy(logits, Tensor::from_vector(reversed, {n}), 0.1);
    const Tensor loss = fn::add(fn::mul_scalar(own, d.lam), fn::mul_scalar(partner, 1.0 - d.lam));
    EXPECT_NEAR(loss_sum, loss.item() * double(n), 1e-4 * std::abs(loss_sum)) << "step " << i;
    autograd::backward(loss);
    twin.sgd->step();
    twin.sgd->zero_grad();
    ASSERT_TRUE(test::all_close(weights(r), weights(twin), {1e-5, 1e-6})) << "step " << i;
  }
  EXPECT_GT(kinds[0], 0);
  EXPECT_GT(kinds[1], 0);
  EXPECT_TRUE(test::all_close(weights(parts), weights(r), {1e-5, 1e-6}));
  test::expect_invalid(
      [&] {
        train::StepOptions bad{
            .loss = [](nn::Module&, const Tensor& x, const Tensor&) { return x; },
            .micro_batch = 4};
        bad.mixing.mixup_alpha = 1;
        train::TrainStep s(*r.model, *r.sgd, {}, bad);
      },
      {"mixup and cutmix", "cross-entropy"});
}

}  // namespace
}  // namespace hg
