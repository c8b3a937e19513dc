// Activation recomputation in the training step (train.recompute): the same weights, running
// statistics and gradients as without it, bit for bit on the CPU; less peak memory; the
// "auto" choice under a memory limit; the config key's errors; and the allocator figures each
// epoch's metrics.jsonl line carries.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "hourglass/device/allocator.h"
#include "hourglass/dist/comm.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/step/recompute_plan.h"
#include "hourglass/train/step/train_step.h"
#include "hourglass/train/trainer.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

constexpr int64_t kRows = 32, kSide = 16, kChannels = 3;

Allocator& cpu_allocator() { return allocator_for(Device::cpu()); }

struct Rig {
  std::shared_ptr<nn::Module> model;
  FlatParameters flat;
  std::unique_ptr<optim::Sgd> sgd;
  std::unique_ptr<train::TrainStep> step;
  Tensor images, labels;
};

// resnet18 with 16 channels in its first stage (8 blocks) on 16x16 images, or tiny_resnet.
Rig make_rig(const std::string& name, std::vector<std::string> recompute,
             int64_t micro_batch = kRows) {
  nn::ModelSpec spec;
  spec.name = name;
  spec.in_channels = kChannels;
  spec.height = spec.width = kSide;
  spec.num_classes = 5;
  spec.base_channels = name == "resnet18" ? 16 : 0;
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
  so.micro_batch = micro_batch;
  so.recompute = std::move(recompute);
  r.step = std::make_unique<train::TrainStep>(*r.model, *r.sgd, train::ExecutionContext{}, so);
  r.images = test::f32_tensor(test::random_values(kRows * kSide * kSide * kChannels, 23),
                              {kRows, kSide, kSide, kChannels});
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < kRows; ++i) labels.push_back((i * 3 + 1) % 5);
  r.labels = Tensor::from_vector(labels, {kRows});
  return r;
}

std::vector<std::string> all_blocks(nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& [name, m] : nn::recompute_candidates(model)) names.push_back(name);
  return names;
}

TEST(RecomputeCandidates, AreTheResNetsBlocks) {
  Rig r = make_rig("resnet18", {});
  EXPECT_EQ(all_blocks(*r.model),
            (std::vector<std::string>{"layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer3.0",
                                      "layer3.1", "layer4.0", "layer4.1"}));
}

// Runs `steps` steps and returns every observable: weights, buffers (batch-norm running
// statistics), the loss sums, and the gradients of one more forward/backward.
struct Trajectory {
  std::vector<double> weights, buffers, losses, grads;
  std::map<int64_t, std::vector<double>> buckets;  // offset -> gradient when reported
  int late_buckets = 0;                            // reported after backward returned
};

// `after_steps` runs between the steps and the readings (which allocate copies).
Trajectory train_steps(Rig& r, int steps, bool buckets,
                       const std::function<void()>& after_steps = nullptr) {
  Trajectory t;
  bool backward_done = false;
  if (buckets) {
    r.step->use_gradient_buckets(2048);  // several buckets
    r.step->hooks().gradients_ready = [&](train::GradientBucket& b) {
      if (backward_done) ++t.late_buckets;
      t.buckets[b.offset] = test::to_doubles(b.grads);
    };
    r.step->hooks().phase = [&](train::StepPhase p, train::PhaseEdge e) {
      if (p == train::StepPhase::Backward) backward_done = e == train::PhaseEdge::End;
    };
  }
  for (int i = 0; i < steps; ++i) t.losses.push_back(r.step->run(r.images, r.labels).loss.item());
  if (after_steps) after_steps();
  t.weights = test::to_doubles(r.flat.params);
  t.buffers = test::to_doubles(r.flat.buffers);
  r.step->forward_backward(r.images, r.labels);
  t.grads = test::to_doubles(r.flat.grads);
  r.sgd->zero_grad();
  return t;
}

void expect_same(const Trajectory& a, const Trajectory& b) {
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.buffers, b.buffers) << "batch-norm running statistics";
  EXPECT_EQ(a.grads, b.grads);
}

TEST(Recompute, Resnet18TrainsTheSameWeightsAndRunningStatisticsBitForBit) {
  Rig plain = make_rig("resnet18", {});
  Rig again = make_rig("resnet18", all_blocks(*plain.model));
  EXPECT_EQ(again.step->recompute_modules().size(), 8u);
  expect_same(train_steps(plain, 3, false), train_steps(again, 3, false));
}

TEST(Recompute, TinyResnetWithMicroBatchesAndSomeBlocksIsBitIdentical) {
  Rig plain = make_rig("tiny_resnet", {}, kRows / 2);
  Rig again = make_rig("tiny_resnet", {"layer2.0"}, kRows / 2);
  EXPECT_EQ(again.step->recompute_modules(), (std::vector<std::string>{"layer2.0"}));
  expect_same(train_steps(plain, 3, false), train_steps(again, 3, false));
}

TEST(Recompute, GradientBucketsAreReportedDuringBackwardWithTheirFinalGradients) {
  Rig plain = make_rig("resnet18", {});
  Rig again = make_rig("resnet18", all_blocks(*plain.model));
  const Trajectory a = train_steps(plain, 2, true), b = train_steps(again, 2, true);
  expect_same(a, b);
  EXPECT_GT(a.buckets.size(), 2u);
  EXPECT_EQ(a.buckets, b.buckets) << "a bucket reported before its gradients were final";
  EXPECT_EQ(a.late_buckets, 0);
  EXPECT_EQ(b.late_buckets, 0) << "a recomputed block's parameters were never reported ready";
}

// The allocator's high-water mark over one forward/backward, above what was in use before.
int64_t step_peak(Rig& r) {
  Allocator& a = cpu_allocator();
  r.step->zero_gradients();  // as between steps: no gradient memory held (release_gradients)
  const size_t before = a.stats().in_use;
  a.reset_peak();
  r.step->forward_backward(r.images, r.labels);
  const int64_t peak = int64_t(a.stats().peak_in_use) - int64_t(before);
  r.step->zero_gradients();
  return peak;
}

TEST(Recompute, LowersThePeakMemoryOfAStep) {
  Rig plain = make_rig("resnet18", {});
  Rig again = make_rig("resnet18", all_blocks(*plain.model));
  const int64_t p0 = step_peak(plain), p1 = step_peak(again);
  // The stem's activations and oneDNN's backward workspaces stay. With 4 channels the
  // workspaces, padded to oneDNN's channel blocks, dominate and recomputation saves only 7%: so
  // 16. With 32 rows (kRows) the activations, not what backward's end holds (the leaf gradients
  // and the gradient arena they are added to, taken back then: engine.release_gradients), decide
  // the peak.
  EXPECT_LT(double(p1), 0.7 * double(p0)) << p1 << " bytes with, " << p0 << " without";
  Rig one = make_rig("resnet18", {"layer1.0"});
  const int64_t p2 = step_peak(one);
  EXPECT_LT(p2, p0);
  EXPECT_GT(p2, p1);
}

struct LimitGuard {
  explicit LimitGuard(size_t bytes) { cpu_allocator().set_limit(bytes); }
  ~LimitGuard() { cpu_allocator().set_limit(0); }
};

const Shape kSample{kSide, kSide, kChannels};

TEST(RecomputeAuto, WithoutALimitRecomputesNothing) {
  Rig r = make_rig("resnet18", {"layer1.0"});
  ASSERT_EQ(cpu_allocator().limit(), 0u);
  EXPECT_TRUE(train::choose_recompute(*r.step, kSample, kRows, cpu_allocator()).empty());
  EXPECT_TRUE(r.step->recompute_modules().empty());
}

TEST(RecomputeAuto, UnderALimitPicksTheFewestBlocksThatFitAndTheStepRuns) {
  Rig plain = make_rig("resnet18", {});
  Rig all = make_rig("resnet18", all_blocks(*plain.model));
  const int64_t p0 = step_peak(plain), p1 = step_peak(all);
  Rig r = make_rig("resnet18", {});
  // The probe allocates a batch of its own as a step's caller has.
  const size_t batch_bytes = r.images.nbytes() + r.labels.nbytes();
  Rig fresh = make_rig("resnet18", {});  // step_peak moved the others' running statistics
  const Trajectory reference = train_steps(fresh, 2, false);
  {
    LimitGuard roomy(cpu_allocator().stats().in_use + size_t(2 * p0) + batch_bytes);
    EXPECT_TRUE(train::choose_recompute(*r.step, kSample, kRows, cpu_allocator()).empty())
        << "a step fits without recomputation";
  }
  auto tight = std::make_unique<LimitGuard>(cpu_allocator().stats().in_use + size_t(p0 + p1) / 2 +
                                            batch_bytes);
  const std::vector<std::string> chosen =
      train::choose_recompute(*r.step, kSample, kRows, cpu_allocator());
  EXPECT_FALSE(chosen.empty());
  EXPECT_LT(chosen.size(), 8u) << "half-way between none and all needs only some blocks";
  EXPECT_EQ(r.step->recompute_modules(), chosen);
  // The steps fit at the whole micro-batch and train what the plain steps train.
  const Trajectory t = train_steps(r, 2, false, [&] { tight.reset(); });
  EXPECT_EQ(r.step->micro_batch_plan().micro_batch_size(), kRows);
  EXPECT_TRUE(r.step->micro_batch_plan().failed_sizes().empty());
  expect_same(reference, t);
}

TEST(RecomputeAuto, MeasuresTheLargerBlocksSavingsFirst) {
  Rig r = make_rig("resnet18", {});
  const auto savings = train::measure_recompute_savings(*r.step, kSample, kRows, cpu_allocator());
  ASSERT_EQ(savings.size(), 8u);
  for (size_t i = 1; i < savings.size(); ++i) EXPECT_GE(savings[i - 1].bytes, savings[i].bytes);
  EXPECT_GT(savings.back().bytes, 0);
  // The first stage works on the largest maps (16x16, against 2x2 in the last).
  EXPECT_EQ(savings.front().name.substr(0, 6), "layer1");
  EXPECT_TRUE(r.step->recompute_modules().empty()) << "measuring leaves the marks alone";
}

// ---- the config key ----

Config config_with(const std::string& recompute_line) {
  return Config::parse(R"(
    seed = 3
    [model]
    name = "tiny_resnet"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 64, test_size = 32, height = 8, width = 8, channels = 3, classes = 4 }
    workers = 0
    [train]
    epochs = 2
    batch_size = 16
    )" + recompute_line + "\n",
                       "recompute.toml");
}

TEST(RecomputeConfig, ParsesNoneAutoAndAList) {
  using train::RecomputeMode;
  EXPECT_EQ(train::parse_run_config(config_with("")).train.recompute.mode, RecomputeMode::None);
  EXPECT_EQ(train::parse_run_config(config_with("recompute = \"none\"")).train.recompute.mode,
            RecomputeMode::None);
  EXPECT_EQ(train::parse_run_config(config_with("recompute = \"auto\"")).train.recompute.mode,
            RecomputeMode::Auto);
  const train::RunConfig listed =
      train::parse_run_config(config_with("recompute = [\"layer2.0\", \"layer1.0\"]"));
  EXPECT_EQ(listed.train.recompute.mode, RecomputeMode::Modules);
  EXPECT_EQ(listed.train.recompute.modules, (std::vector<std::string>{"layer1.0", "layer2.0"}));
  // It changes memory, not results: not part of the trajectory.
  EXPECT_EQ(train::trajectory_config_text(listed),
            train::trajectory_config_text(train::parse_run_config(config_with(""))));
}

TEST(RecomputeConfig, BadValuesNameTheKey) {
  auto parse = [](const std::string& line) {
    return [line] { train::parse_run_config(config_with(line)); };
  };
  test::expect_invalid(parse("recompute = \"sometimes\""),
                       {"train.recompute", "recompute.toml", "sometimes", "\"auto\""});
  test::expect_invalid(parse("recompute = []"), {"train.recompute", "empty"});
  test::expect_invalid(parse("recompute = [1, 2]"), {"train.recompute", "list of block names"});
  test::expect_invalid(parse("recompute = true"), {"train.recompute"});
  test::expect_invalid(parse("recompute = [\"auto\", \"layer1.0\"]"), {"train.recompute", "auto"});
  Config synced = config_with("recompute = \"auto\"");
  synced.set_override("distributed.sync_batch_norm=true");
  test::expect_invalid([&] { train::parse_run_config(synced); },
                       {"train.recompute", "sync_batch_norm"});
  test::expect_invalid([] { train::parse_recompute_text("", "--recompute"); }, {"--recompute"});
  EXPECT_EQ(train::parse_recompute_text("layer1.0,layer2.0", "--recompute").modules.size(), 2u);
}

TEST(RecomputeConfig, AnUnknownBlockIsAnErrorListingTheValidOnes) {
  const std::string dir = test::fresh_temp_dir("hourglass_recompute_unknown");
  test::expect_invalid(
      [&] {
        train::Trainer t(config_with("recompute = [\"layer1.0\", \"layer9.0\"]"), {dir, false});
      },
      {"train.recompute", "recompute.toml", "'layer9.0'", "layer1.0, layer2.0"});
}

// ---- through the trainer, and the allocator figures per epoch ----

TEST(RecomputeTrainer, TrainsTheSameWeightsAndReportsMemoryPerEpoch) {
  const std::string plain_dir = test::fresh_temp_dir("hourglass_recompute_plain");
  const std::string dir = test::fresh_temp_dir("hourglass_recompute_listed");
  train::Trainer plain(config_with(""), {plain_dir, false});
  train::Trainer listed(config_with("recompute = [\"layer1.0\", \"layer2.0\"]"), {dir, false});
  const auto hp = plain.run();
  const auto hl = listed.run();
  EXPECT_EQ(plain.parameters().params.to_vector<float>(),
            listed.parameters().params.to_vector<float>());
  EXPECT_EQ(plain.parameters().buffers.to_vector<float>(),
            listed.parameters().buffers.to_vector<float>());
  test::expect_same_final_tensors(plain_dir, dir);
  ASSERT_EQ(hl.size(), 2u);
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    const nlohmann::json j = nlohmann::json::parse(line);
    ASSERT_TRUE(j.contains("peak_memory_mib") && j.contains("reserved_memory_mib") &&
                j.contains("memory_fragmentation"))
        << line;
    const double peak = j["peak_memory_mib"], reserved = j["reserved_memory_mib"],
                 fragmentation = j["memory_fragmentation"];
    EXPECT_GT(peak, 0.0);
    EXPECT_GE(reserved, peak * (1 - 1e-9));
    EXPECT_GE(fragmentation, 0.0);
    EXPECT_LT(fragmentation, 1.0);
    EXPECT_NEAR(fragmentation, 1.0 - peak / reserved, 1e-6);
  }
  EXPECT_EQ(lines, 2);
  EXPECT_NE(test::read_file(dir + "/metrics.csv").find("peak_memory_mib"), std::string::npos);
  // The same epochs' peak with and without recomputation: lower with it.
  EXPECT_LT(hl.back().peak_memory_mib, hp.back().peak_memory_mib);
}

TEST(RecomputeTrainer, DataParallelRanksTakeRankZerosAutoChoice) {
  // One rank of the data-parallel path: the choice goes through the broadcast and back.
  auto comm = make_single_process_communicator();
  train::TrainerOptions o{test::fresh_temp_dir("hourglass_recompute_dp"), false};
  o.communicator = comm.get();
  train::Trainer t(config_with("recompute = \"auto\""), o);
  EXPECT_TRUE(t.step().recompute_modules().empty()) << "no memory limit";
  t.run();
}

}  // namespace
}  // namespace hg
