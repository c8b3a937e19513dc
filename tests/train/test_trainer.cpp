// The trainer in process: gradient accumulation keeps the effective batch, the shipped ResNet
// config trains, and a config with a bad value fails before any work naming the key.
#include <gtest/gtest.h>

#include "support/temp_dir.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "hourglass/device/allocator.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/run/checkpoint_dir.h"
#include "hourglass/train/trainer.h"
#include "support/expect_error.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

std::string run_dir(const std::string& name) {
  return test::fresh_temp_dir("hourglass_trainer_" + name);
}

Config synthetic_mlp_config() {
  Config c = Config::parse(R"(
    seed = 3
    [model]
    name = "mlp"
    hidden = [32]
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 192, test_size = 64, height = 6, width = 6, channels = 2, classes = 4 }
    workers = 0
    [optim]
    name = "sgd"
    lr = 0.05
    momentum = 0.9
    nesterov = true
    weight_decay = 1e-3
    [train]
    epochs = 2
    batch_size = 32
  )",
                           "mlp.toml");
  return c;
}

std::vector<float> final_weights(train::Trainer& t) {
  return t.parameters().params.to_vector<float>();
}

// A ResNet on 4x4 images ends in a 1x1 map, where a batch of one sample gives batch norm one
// value per channel: 65 samples in batches of 32 leave such a batch every epoch, which is left
// out (and said), so the run finishes instead of failing at every epoch's end.
TEST(Trainer, ALastBatchBatchNormCannotTrainOnIsLeftOut) {
  Config c = synthetic_mlp_config();
  c.set_override("model.name=\"resnet18\"");
  c.set_override("model.channels=4");
  c.set_override("data.synthetic.height=4");
  c.set_override("data.synthetic.width=4");
  c.set_override("data.synthetic.train_size=65");
  train::Trainer t(c, {run_dir("last_batch_of_one"), false});
  EXPECT_EQ(t.setup().train_loader->batches_per_epoch(), 2);
  const auto history = t.run();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_TRUE(std::isfinite(history.back().train_loss));
  Config mlp = synthetic_mlp_config();  // no batch norm: the batch of one trains
  mlp.set_override("data.synthetic.train_size=65");
  train::Trainer m(mlp, {run_dir("last_batch_of_one_mlp"), false});
  EXPECT_EQ(m.setup().train_loader->batches_per_epoch(), 3);
}

TEST(Trainer, GradientAccumulationKeepsTheEffectiveBatch) {
  // An MLP has no batch-norm, so splitting each batch of 32 into 4 micro-batches of 8 must
  // give the same gradients, up to float32 summation order.
  Config one = synthetic_mlp_config();
  Config four = synthetic_mlp_config();
  four.set_override("train.grad_accum=4");
  train::Trainer a(one, {run_dir("accum1"), false});
  train::Trainer b(four, {run_dir("accum4"), false});
  auto ha = a.run();
  auto hb = b.run();
  auto wa = final_weights(a), wb = final_weights(b);
  ASSERT_EQ(wa.size(), wb.size());
  double max_diff = 0;
  for (size_t i = 0; i < wa.size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(wa[i] - wb[i])));
  // 12 SGD steps of weights O(0.1); summation-order differences are ~1e-7 per step.
  EXPECT_LT(max_diff, 1e-5);
  EXPECT_NEAR(ha.back().train_loss, hb.back().train_loss, 1e-5);
  EXPECT_LT(ha.back().train_loss, ha.front().train_loss);
}

TEST(Trainer, AValidationSplitIsHeldOutAndChoosesTheBestCheckpoint) {
  Config c = synthetic_mlp_config();
  c.set_override("data.val_fraction=0.25");
  c.set_override("train.epochs=6");
  c.set_override("optim.lr=0.02");
  const std::string dir = run_dir("validation");
  train::Trainer t(c, {dir, false});
  const std::vector<train::EpochMetrics> history = t.run();
  ASSERT_EQ(history.size(), 6u);
  // 192 training samples of 4 classes: a quarter of each class held out.
  const train::TrainingSetup& setup = t.setup();
  ASSERT_TRUE(setup.parts.validation_set);
  EXPECT_EQ(setup.parts.train_set->size() + setup.parts.validation_set->size(), 192);
  EXPECT_NEAR(double(setup.parts.validation_set->size()), 48.0, 2.0);
  EXPECT_EQ(setup.parts.test_set->size(), 64);
  size_t best_epoch = 0, best_test_epoch = 0;
  for (size_t e = 0; e < history.size(); ++e) {
    EXPECT_TRUE(history[e].has_validation);
    EXPECT_GE(history[e].val_acc, 0.0);
    EXPECT_LE(history[e].val_acc, 1.0);
    if (history[e].val_acc > history[best_epoch].val_acc) best_epoch = e;
    if (history[e].test_acc > history[best_test_epoch].test_acc) best_test_epoch = e;
  }
  // `best` is the epoch-end checkpoint of the best validation accuracy, whatever the test says.
  const int64_t steps_per_epoch = t.global_step() / 6;
  std::ifstream best(dir + "/checkpoints/best");
  std::string best_name;
  std::getline(best, best_name);
  EXPECT_EQ(best_name, train::CheckpointDir::file_name(steps_per_epoch * int64_t(best_epoch + 1)))
      << "best validation epoch " << best_epoch + 1 << ", best test epoch " << best_test_epoch + 1;
  // metrics.jsonl carries both accuracies on every line.
  std::ifstream metrics(dir + "/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line); ++lines) {
    EXPECT_NE(line.find("\"val_acc\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"test_acc\""), std::string::npos) << line;
  }
  EXPECT_EQ(lines, 6);
}

// train.eval_every = 2 over 5 epochs: epochs 2, 4 and 5 (the last) are evaluated; the others'
// metrics lines carry no test or validation fields, and `best` is one of the evaluated epochs.
// The weights are those of the run that evaluates every epoch (evaluation changes nothing).
// Early stopping needs every epoch evaluated, so it refuses the key.
// CIFAR-100 by name, with its 20 coarse labels: the model is built for 20 classes, and the
// choice is part of the run's recorded config.
TEST(Trainer, Cifar100CoarseLabelsTrainATwentyClassModel) {
  const std::string data = test::fresh_temp_dir("hourglass_trainer_cifar100_data");
  auto records = [](int count) {
    std::string out;
    for (int i = 0; i < count; ++i) {
      out += char(i % 20);   // coarse
      out += char(i % 100);  // fine
      for (int p = 0; p < 3072; ++p) out += char((i * 13 + p * 7) % 251);
    }
    return out;
  };
  std::ofstream(data + "/train.bin", std::ios::binary) << records(40);
  std::ofstream(data + "/test.bin", std::ios::binary) << records(10);
  Config c = Config::parse(R"(
    [model]
    name = "mlp"
    hidden = [8]
    [data]
    dataset = "cifar100"
    cifar100_labels = "coarse"
    workers = 0
    [train]
    epochs = 1
    batch_size = 8
  )",
                           "cifar100.toml");
  c.set_override("data.path=\"" + data + "\"");
  train::TrainerOptions o{run_dir("cifar100")};
  o.progress = false;
  train::Trainer t(c, o);
  const auto history = t.run();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_TRUE(std::isfinite(history[0].test_loss));
  // 20 classes: the top-5 accuracy is reported, and is at least the top-1.
  EXPECT_GE(history[0].test_top5, history[0].test_acc);
  EXPECT_LE(history[0].test_top5, 1.0);
  std::ifstream metrics(t.run_dir() + "/metrics.jsonl");
  const std::string lines((std::istreambuf_iterator<char>(metrics)), {});
  EXPECT_NE(lines.find("\"test_top5\":"), std::string::npos) << lines;
  EXPECT_EQ(t.parameters().params.numel(), 3072 * 8 + 8 + 8 * 20 + 20);
  std::ifstream config(t.run_dir() + "/config.toml");
  const std::string text((std::istreambuf_iterator<char>(config)), {});
  EXPECT_NE(text.find("cifar100_labels = 'coarse'"), std::string::npos) << text;
}

TEST(Trainer, EvalEveryEvaluatesOnlyThoseEpochsAndTheLast) {
  Config every = synthetic_mlp_config();
  every.set_override("data.val_fraction=0.25");
  every.set_override("train.epochs=5");
  Config some = every;
  some.set_override("train.eval_every=2");
  train::Trainer a(every, {run_dir("eval_every_1"), false});
  const std::string dir = run_dir("eval_every_2");
  train::Trainer b(some, {dir, false});
  const std::vector<train::EpochMetrics> ha = a.run(), hb = b.run();
  ASSERT_EQ(hb.size(), 5u);
  EXPECT_EQ(final_weights(a), final_weights(b));
  const std::vector<bool> evaluated{false, true, false, true, true};
  for (size_t e = 0; e < hb.size(); ++e) {
    EXPECT_EQ(hb[e].evaluated, evaluated[e]) << "epoch " << e + 1;
    if (evaluated[e]) {
      EXPECT_EQ(hb[e].test_acc, ha[e].test_acc) << "epoch " << e + 1;
      EXPECT_EQ(hb[e].val_acc, ha[e].val_acc) << "epoch " << e + 1;
    }
  }
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  for (size_t e = 0; e < lines.size(); ++e) {
    EXPECT_EQ(lines[e].find("\"test_acc\"") != std::string::npos, bool(evaluated[e])) << lines[e];
    EXPECT_EQ(lines[e].find("\"val_acc\"") != std::string::npos, bool(evaluated[e])) << lines[e];
    EXPECT_NE(lines[e].find("\"train_loss\""), std::string::npos) << lines[e];
  }
  std::ifstream best(dir + "/checkpoints/best");
  std::string best_name;
  std::getline(best, best_name);
  const int64_t steps_per_epoch = b.global_step() / 5;
  bool best_is_evaluated = false;
  for (int64_t epoch : {2, 4, 5})
    best_is_evaluated |= best_name == train::CheckpointDir::file_name(steps_per_epoch * epoch);
  EXPECT_TRUE(best_is_evaluated) << best_name;

  Config stopping = some;
  stopping.set_override("train.early_stop_patience=2");
  test::expect_invalid(
      [&] {
        train::Trainer(stopping, {run_dir("eval_every_stop"), false});
      },
      {"train.eval_every", "early", "train.eval_every = 1"});
}

TEST(Trainer, AValidationFractionThatLeavesNothingIsRefusedNamingTheKey) {
  Config c = synthetic_mlp_config();
  c.set_override("data.val_fraction=0.001");  // round(0.001 x 48) = 0 per class
  try {
    train::Trainer t(c, {run_dir("validation_empty"), false});
    FAIL() << "a validation split of no samples was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("data.val_fraction"), std::string::npos) << e.message();
  }
}

// With a learning rate too small to move an f32 weight, the validation accuracy never changes:
// patience 2 ends the run after epoch 3 of 8 (epoch 1 sets the best, 2 and 3 do not beat it),
// with final weights and three metrics lines. Without validation the key is refused.
TEST(Trainer, EarlyStoppingEndsTheRunWhenValidationStopsImproving) {
  Config c = synthetic_mlp_config();
  c.set_override("data.val_fraction=0.25");
  c.set_override("train.epochs=8");
  c.set_override("optim.lr=1e-30");
  c.set_override("optim.momentum=0");
  c.set_override("optim.nesterov=false");
  c.set_override("optim.weight_decay=0");
  c.set_override("train.early_stop_patience=2");
  const std::string dir = run_dir("early_stop");
  train::Trainer t(c, {dir, false});
  const std::vector<train::EpochMetrics> history = t.run();
  ASSERT_EQ(history.size(), 3u);
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(history[1].val_acc, history[0].val_acc);
  EXPECT_EQ(history[2].val_acc, history[0].val_acc);
  EXPECT_EQ(read_safetensors_metadata(dir + "/final.safetensors")
                .at("hourglass.stopped_early_after_epoch"),
            "3");
  std::ifstream metrics(dir + "/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  EXPECT_EQ(lines, 3);

  // Stopped mid-epoch 2 and resumed: the count goes on from the epochs already trained.
  const std::string resumed_dir = run_dir("early_stop_resumed");
  {
    train::TrainerOptions o{resumed_dir, false};
    o.stop_after_steps = 7;
    train::Trainer first(c, o);
    first.run();
    ASSERT_TRUE(first.stopped());
  }
  train::TrainerOptions o{resumed_dir, false};
  o.resume = "auto";
  train::Trainer resumed(c, o);
  EXPECT_EQ(resumed.run().size(), 3u);
  EXPECT_EQ(read_safetensors_metadata(resumed_dir + "/final.safetensors")
                .at("hourglass.stopped_early_after_epoch"),
            "3");

  Config no_validation = synthetic_mlp_config();
  no_validation.set_override("train.early_stop_patience=2");
  test::expect_invalid(
      [&] {
        train::Trainer(no_validation, {run_dir("early_stop_no_val"), false});
      },
      {"train.early_stop_patience", "validation", "data.val_fraction"});
}

TEST(RunHistory, EpochsWithoutImprovementCountFromTheBestValidationEpoch) {
  auto epochs = [](std::vector<double> accs) {
    std::vector<train::EpochMetrics> h;
    for (double a : accs) {
      train::EpochMetrics m;
      m.has_validation = true;
      m.val_acc = a;
      h.push_back(m);
    }
    return h;
  };
  EXPECT_EQ(train::epochs_without_improvement({}, 0), 0);
  EXPECT_EQ(train::epochs_without_improvement(epochs({0.5}), 0), 0);
  EXPECT_EQ(train::epochs_without_improvement(epochs({0.5, 0.6, 0.55, 0.6}), 0), 2);
  EXPECT_EQ(train::epochs_without_improvement(epochs({0.5, 0.6, 0.55, 0.61}), 0), 0);
  EXPECT_EQ(train::epochs_without_improvement(epochs({0.5, 0.6, 0.55, 0.61}), 0.02), 2);
  EXPECT_EQ(train::epochs_without_improvement(epochs({0.0, 0.0, 0.0}), 0), 2);
  std::vector<train::EpochMetrics> no_val = epochs({0.5, 0.4});
  no_val[1].has_validation = false;
  EXPECT_EQ(train::epochs_without_improvement(no_val, 0), 0);
}

TEST(Trainer, OutOfMemoryHalvesTheMicroBatchAndKeepsTheTrajectory) {
  // A small CNN (activations dominate its memory) run three ways: micro-batches of 64 and of
  // 128 without a limit, to measure each one's peak; then 128 under a limit between the two,
  // which must fall back to 64 and end exactly where the 64 run ended (the failed attempt's
  // batch-norm updates are rolled back).
  Allocator& cpu = allocator_for(Device::cpu());
  auto config = [](int64_t micro) {
    Config c = synthetic_mlp_config();
    c.set_override("model.name=\"small_cnn\"");
    c.set_override("data.synthetic.height=16");
    c.set_override("data.synthetic.width=16");
    c.set_override("data.synthetic.channels=1");
    c.set_override("train.batch_size=128");
    c.set_override("train.micro_batch=" + std::to_string(micro));
    return c;
  };
  auto peak_of = [&](train::Trainer& t) {
    cpu.reset_peak();
    const size_t base = cpu.stats().in_use;
    t.run();
    return std::pair{base, cpu.stats().peak_in_use - base};
  };
  train::Trainer a(config(64), {run_dir("oom_64"), false});
  const auto [base64, peak64] = peak_of(a);
  train::Trainer whole(config(128), {run_dir("oom_128"), false});
  const auto [base128, peak128] = peak_of(whole);
  ASSERT_GT(peak128, peak64 + peak64 / 4) << "the step does not dominate memory";

  train::Trainer b(config(128), {run_dir("oom_shrunk"), false});
  struct LimitGuard {
    Allocator& a;
    ~LimitGuard() { a.set_limit(0); }
  } guard{cpu};
  cpu.set_limit(cpu.stats().in_use + (peak64 + peak128) / 2);
  b.run();
  cpu.set_limit(0);
  EXPECT_EQ(final_weights(a), final_weights(b));
  EXPECT_NE(final_weights(whole), final_weights(b));
  std::map<std::string, Tensor> state_a, state_b;
  for (auto& [n, t] : a.model().named_buffers()) state_a[n] = t;
  for (auto& [n, t] : b.model().named_buffers())
    EXPECT_EQ(t.to_vector<float>(), state_a.at(n).to_vector<float>()) << n;
}

TEST(Trainer, ShippedResNet18ConfigTrainsAndItsLossFalls) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Config c = Config::load(HG_SOURCE_DIR "/configs/fashion-mnist-resnet18.toml");
  // A few steps only: ResNet-18 trains at ~100 images/s on two cores.
  c.set_override("data.train_limit=256");
  c.set_override("data.test_limit=64");
  c.set_override("train.batch_size=64");
  c.set_override("train.epochs=3");
  // Twelve steps are too few for the one-cycle warm-up to lr 0.1; a small constant rate
  // shows the falling loss the full schedule produces over a real run.
  c.set_override("schedule.name=\"constant\"");
  c.set_override("optim.lr=0.02");
  const std::string dir = run_dir("resnet18");
  train::Trainer t(c, {dir, false});
  auto history = t.run();
  ASSERT_EQ(history.size(), 3u);
  EXPECT_LT(history.back().train_loss, history.front().train_loss);
  for (const auto& m : history) EXPECT_TRUE(std::isfinite(m.train_loss));
  SafetensorsFile f = load_safetensors(dir + "/final.safetensors");
  EXPECT_EQ(f.at("stem.conv.weight").shape(), (Shape{64, 3, 3, 1}));
  // The weights only: the optimizer's state stays in the checkpoints, its step in the metadata.
  EXPECT_EQ(f.find("optim.momentum"), nullptr);
  EXPECT_EQ(f.metadata.at("hourglass.optim.step"), std::to_string(t.global_step()));
  EXPECT_NE(load_safetensors(t.last_checkpoint()).find("optim.momentum"), nullptr);
}

TEST(Trainer, BadValuesFailBeforeTrainingNamingTheKey) {
  for (const char* bad : {"train.grad_accum=64", "train.label_smoothing=1.5",
                          "optim.decay=\"some\"", "schedule.name=\"cosinus\"", "data.workers=-1"}) {
    Config c = synthetic_mlp_config();
    c.set_override(bad);
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    try {
      train::Trainer t(c, {run_dir("bad"), false});
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidInput) << bad;
      const std::string text = e.one_line();
      const std::string leaf = key.substr(key.find('.') + 1);
      EXPECT_TRUE(text.find(key) != std::string::npos || text.find(leaf) != std::string::npos)
          << bad << " -> " << text;
    }
  }
}

}  // namespace
}  // namespace hg
