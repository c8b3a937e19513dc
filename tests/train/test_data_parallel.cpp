// Data parallelism: gradient buckets (alone), and whole training runs over Open MPI's ranks
// against one process on the same global batch. CTest runs this binary alone (the MPI tests
// skip) and under mpiexec with 2 and 4 ranks (tests/CMakeLists.txt).
//
// The reference is one process with train.micro_batch = global batch / ranks: its micro-batch k
// holds exactly rank k's rows and takes the same loss weight, so the only difference left is
// the order in which the ranks' gradients are added. With 2 ranks that is a + b against b + a,
// the same bits; with 4, MPI may pair them differently, so the weights agree within float
// rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hourglass/autograd/tape.h"
#include "hourglass/dist/comm.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/step/gradient_buckets.h"
#include "hourglass/train/trainer.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

// One MPI communicator for the whole binary (MPI is initialised once per process); null
// without MPI.
Communicator* world() {
  static std::unique_ptr<Communicator> comm =
      mpi_available() ? make_mpi_communicator() : std::unique_ptr<Communicator>();
  return comm.get();
}

#define SKIP_UNLESS_SEVERAL_RANKS()                                                 \
  if (world() == nullptr || world()->size() < 2)                                    \
  GTEST_SKIP() << "needs several MPI ranks (CTest runs this binary under mpiexec: " \
                  "train_data_parallel_mpi_np2 / _np4)"

Config resnet_config() {
  // A batch-norm model, so the ranks' differing running statistics are exercised; 128 training
  // samples in batches of 32: every batch splits evenly across 2 and 4 ranks.
  return Config::parse(R"(
    seed = 11
    threads = 1
    [model]
    name = "tiny_resnet"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 128, test_size = 40, height = 8, width = 8, channels = 3, classes = 5 }
    augment = true
    workers = 0
    [optim]
    name = "sgd"
    lr = 0.05
    momentum = 0.9
    weight_decay = 5e-4
    [train]
    epochs = 2
    batch_size = 32
    eval_batch_size = 16
    label_smoothing = 0.1
    [distributed]
    bucket_mb = 1
  )",
                       "dp.toml");
}

// A run directory every rank agrees on (rank 0's).
std::string shared_dir(const std::string& name) {
  char path[512] = {};
  if (world()->rank() == 0) {
    // Named by the world size too: the 2- and 4-rank jobs may run at once (ctest -j).
    const std::string dir =
        test::fresh_temp_dir(fmt::format("hourglass_dp_np{}_{}", world()->size(), name));
    std::snprintf(path, sizeof path, "%s", dir.c_str());
  }
  world()->broadcast(path, sizeof path, 0);
  return path;
}

std::vector<float> weights(const train::Trainer& t) {
  return t.parameters().params.to_vector<float>();
}

// Every rank holds rank 0's weights, bit for bit.
void expect_same_on_every_rank(const std::vector<float>& w) {
  std::vector<float> root = w;
  world()->broadcast(root.data(), root.size() * sizeof(float), 0);
  EXPECT_EQ(std::memcmp(root.data(), w.data(), w.size() * sizeof(float)), 0)
      << "rank " << world()->rank() << " differs from rank 0";
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

// The one-process reference for `ranks` ranks: micro-batches of one rank's rows.
std::vector<float> reference_weights(Config c, int ranks, const std::string& name,
                                     std::vector<train::EpochMetrics>* history = nullptr) {
  c.set_override("train.micro_batch=" + std::to_string(32 / ranks));
  train::Trainer t(
      c, {test::fresh_temp_dir(fmt::format("hourglass_dp_ref_np{}_{}", ranks, name)), false});
  auto h = t.run();
  if (history) *history = h;
  return weights(t);
}

TEST(GradientBuckets, CoverTheArenaFromItsEndInWholeParameters) {
  nn::ModelSpec spec;
  spec.name = "tiny_resnet";
  spec.in_channels = 3;
  spec.height = spec.width = 8;
  spec.num_classes = 5;
  auto model = nn::make_model(spec);
  const FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::WeightsOnly);
  const int64_t bucket_bytes = 4096;
  train::GradientBuckets buckets(*model, flat, bucket_bytes);
  ASSERT_GT(buckets.size(), 2);
  // Offsets of the parameters' starts and ends: bucket edges must fall on them.
  std::vector<int64_t> edges;
  int64_t largest = 0;
  for (const auto& p : model->named_parameters()) {
    edges.push_back(p.tensor.storage_offset());
    edges.push_back(p.tensor.storage_offset() + p.tensor.numel());
    largest = std::max(largest, p.tensor.numel());
  }
  auto is_edge = [&](int64_t x) { return std::find(edges.begin(), edges.end(), x) != edges.end(); };
  int64_t expected_end = flat.grads.numel();
  for (int64_t k = 0; k < buckets.size(); ++k) {
    const train::GradientBucket& b = buckets.bucket(k);
    const int64_t n = b.grads.numel();
    EXPECT_EQ(b.offset + n, expected_end) << "bucket " << k << " does not follow bucket " << k - 1;
    EXPECT_TRUE(is_edge(b.offset)) << "bucket " << k << " starts inside a parameter";
    EXPECT_TRUE(n * 4 <= bucket_bytes || n <= largest) << "bucket " << k << " is too large";
    EXPECT_EQ(b.grads.data_ptr(), flat.grads.data<float>() + b.offset);
    expected_end = b.offset;
  }
  EXPECT_EQ(expected_end, 0) << "the buckets leave the arena's start uncovered";
}

// Each bucket is reported once per step, while backward still runs (the first layer's gradient
// is still zero at the first report), with gradients that no later part of backward changes.
TEST(GradientBuckets, AreReportedOnceWithFinalGradientsDuringBackward) {
  nn::ModelSpec spec;
  spec.name = "tiny_resnet";
  spec.in_channels = 3;
  spec.height = spec.width = 8;
  spec.num_classes = 5;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 5);
  const FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::WeightsOnly);
  optim::Sgd sgd(flat, SgdOptions{});
  train::ExecutionContext context;
  train::StepOptions options;
  options.micro_batch = 6;
  train::TrainStep step(*model, sgd, context, options);
  step.use_gradient_buckets(2048);
  const int64_t count = step.gradient_buckets()->size();
  ASSERT_GT(count, 2);
  std::map<int64_t, std::vector<float>> at_report;  // offset -> the bucket's values then
  std::vector<int64_t> order;
  bool backward_done = false;
  const Tensor first_layer = model->named_parameters().front().tensor.grad();
  step.hooks().gradients_ready = [&](train::GradientBucket& b) {
    EXPECT_FALSE(backward_done);
    if (order.empty()) {
      const std::vector<float> g = first_layer.to_vector<float>();
      EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0; }))
          << "the first bucket was reported after backward reached the first layer";
    }
    EXPECT_TRUE(at_report.emplace(b.offset, b.grads.to_vector<float>()).second)
        << "bucket at " << b.offset << " reported twice";
    order.push_back(b.offset);
  };
  step.hooks().gradients_done = [&] {
    backward_done = true;
    // Backward has reached the first layer now.
    const std::vector<float> g = first_layer.to_vector<float>();
    EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float v) { return v != 0; }));
    ASSERT_EQ(int64_t(at_report.size()), count);
    for (const auto& [offset, values] : at_report) {
      const std::vector<float> now =
          flat.grads.narrow(0, offset, int64_t(values.size())).to_vector<float>();
      EXPECT_EQ(now, values) << "bucket at " << offset << " changed after it was reported";
    }
  };
  const Tensor images = Tensor::full({6, 8, 8, 3}, 0.5);
  Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 0}, {6});
  step.run(images, labels);
  ASSERT_EQ(int64_t(order.size()), count);
}

// Micro-batches: only the last one's backward reports buckets, so each is reported once with
// the whole batch's gradient.
TEST(GradientBuckets, OnlyTheLastMicroBatchReports) {
  nn::ModelSpec spec;
  spec.name = "mlp";
  spec.hidden = {16};
  spec.in_channels = 1;
  spec.height = spec.width = 4;
  spec.num_classes = 3;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 9);
  const FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
  optim::Sgd sgd(flat, SgdOptions{});
  train::TrainStep step(*model, sgd, {}, {.micro_batch = 2});
  step.use_gradient_buckets(64);
  int64_t reports = 0;
  std::vector<float> at_done;
  step.hooks().gradients_ready = [&](train::GradientBucket&) { ++reports; };
  step.hooks().gradients_done = [&] { at_done = flat.grads.to_vector<float>(); };
  Tensor images = Tensor::full({6, 4, 4, 1}, 0.25);
  Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 2}, {6});
  step.run(images, labels);
  EXPECT_EQ(reports, step.gradient_buckets()->size());
  // The same batch in one micro-batch gives the same gradient (up to summation order).
  auto model2 = nn::make_model(spec);
  nn::initialize(*model2, 9);
  const FlatParameters flat2 = nn::build_parameter_arena(*model2, nn::DecayScope::All);
  optim::Sgd sgd2(flat2, SgdOptions{});
  train::TrainStep whole(*model2, sgd2, {}, {.micro_batch = 6});
  std::vector<float> whole_grads;
  whole.hooks().gradients_done = [&] { whole_grads = flat2.grads.to_vector<float>(); };
  whole.run(images, labels);
  ASSERT_EQ(at_done.size(), whole_grads.size());
  for (size_t i = 0; i < at_done.size(); ++i) EXPECT_NEAR(at_done[i], whole_grads[i], 1e-6);
}

TEST(DataParallel, RanksTrainTheWeightsOfOneProcessOnTheWholeBatch) {
  SKIP_UNLESS_SEVERAL_RANKS();
  const int ranks = world()->size();
  Config c = resnet_config();
  // The same config as the reference: each rank's part is one micro-batch.
  c.set_override("train.micro_batch=" + std::to_string(32 / ranks));
  train::TrainerOptions o{shared_dir("equal"), false};
  o.communicator = world();
  train::Trainer t(c, o);
  const auto history = t.run();
  const std::vector<float> w = weights(t);
  expect_same_on_every_rank(w);
  ASSERT_EQ(history.size(), 2u);
  if (world()->rank() != 0) return;
  std::vector<train::EpochMetrics> ref_history;
  const std::vector<float> ref = reference_weights(resnet_config(), ranks, "equal", &ref_history);
  ASSERT_EQ(w.size(), ref.size());
  if (ranks == 2)
    EXPECT_EQ(std::memcmp(w.data(), ref.data(), w.size() * sizeof(float)), 0)
        << "max difference " << max_abs_diff(w, ref);
  else
    EXPECT_LT(max_abs_diff(w, ref), 1e-5);
  // The epoch's metrics cover the whole training set, all ranks' rows.
  EXPECT_NEAR(history.back().train_loss, ref_history.back().train_loss, 1e-5);
  EXPECT_NEAR(history.back().train_acc, ref_history.back().train_acc, 1e-9);
  EXPECT_TRUE(fs::exists(o.run_dir + "/final.safetensors"));
  EXPECT_TRUE(fs::exists(o.run_dir + "/metrics.jsonl"));
}

// Synchronised batch norm: N ranks normalise with the statistics of the whole global batch, as
// one process without micro-batches does, so weights and running statistics match it (up to
// rounding: the ranks' statistics are combined in another order).
TEST(DataParallel, SyncBatchNormNormalisesOverTheWholeBatch) {
  SKIP_UNLESS_SEVERAL_RANKS();
  Config c = resnet_config();
  c.set_override("distributed.sync_batch_norm=true");
  train::TrainerOptions o{shared_dir("syncbn"), false};
  o.communicator = world();
  train::Trainer t(c, o);
  const auto history = t.run();
  const std::vector<float> w = weights(t);
  const std::vector<float> stats = t.parameters().buffers.to_vector<float>();
  expect_same_on_every_rank(w);
  expect_same_on_every_rank(stats);
  if (world()->rank() != 0) return;
  train::Trainer ref(c, {test::fresh_temp_dir("hourglass_dp_ref_syncbn"), false});
  const auto ref_history = ref.run();
  EXPECT_LT(max_abs_diff(w, weights(ref)), 2e-5);
  EXPECT_LT(max_abs_diff(stats, ref.parameters().buffers.to_vector<float>()), 2e-5);
  EXPECT_NEAR(history.back().test_acc, ref_history.back().test_acc, 1e-9);
}

// A checkpoint written by N ranks in the middle of an epoch continues in one process (the data
// position is a batch of the global batch size) to the weights of an uninterrupted run.
TEST(DataParallel, ACheckpointOfSeveralRanksContinuesInOneProcess) {
  SKIP_UNLESS_SEVERAL_RANKS();
  const int ranks = world()->size();
  Config c = resnet_config();
  c.set_override("train.micro_batch=" + std::to_string(32 / ranks));
  train::TrainerOptions o{shared_dir("resume"), false};
  o.communicator = world();
  o.stop_after_steps = 5;  // step 5 of 8: in the second epoch
  {
    train::Trainer t(c, o);
    t.run();
    EXPECT_TRUE(t.stopped());
    EXPECT_EQ(t.global_step(), 5);
    expect_same_on_every_rank(weights(t));
  }
  world()->barrier();
  if (world()->rank() != 0) return;
  train::TrainerOptions alone{o.run_dir, false, "auto"};
  train::Trainer resumed(c, alone);
  EXPECT_EQ(resumed.resumed_from(), o.run_dir + "/checkpoints/step-000000005.safetensors");
  const auto history = resumed.run();
  ASSERT_FALSE(resumed.stopped());
  const std::vector<float> w = weights(resumed),
                           ref = reference_weights(resnet_config(), ranks, "resume");
  if (ranks == 2)
    EXPECT_EQ(std::memcmp(w.data(), ref.data(), w.size() * sizeof(float)), 0)
        << "max difference " << max_abs_diff(w, ref);
  else
    EXPECT_LT(max_abs_diff(w, ref), 1e-5);
  ASSERT_EQ(history.size(), 2u);
}

}  // namespace
}  // namespace hg
