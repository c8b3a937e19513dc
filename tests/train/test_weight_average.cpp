// The weights' moving average (train.ema_decay, step/weight_average.h) against a float64
// transcription of torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn(decay) and
// use_buffers=True: the first update copies, each later one is a lerp towards the model by
// (1 - decay); evaluation in its place puts the model's own values back; a trained run reports
// it and writes final_ema.safetensors. The batch-norm statistics recomputed for the average
// (train.ema_batch_norm = "recompute") against a float64 transcription of torch's update_bn.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include "hourglass/nn/layers.h"
#include "hourglass/train/step/weight_average.h"
#include "hourglass/train/trainer.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

FlatParameters flat_of(const std::vector<double>& params, const std::vector<double>& buffers) {
  FlatParameters flat;
  flat.params = test::f32_tensor(params, {int64_t(params.size())});
  flat.buffers = test::f32_tensor(buffers, {int64_t(buffers.size())});
  return flat;
}

TEST(WeightAverage, FollowsAveragedModelsExponentialAverage) {
  const double decay = 0.9;
  const int64_t n = 1000, m = 37;
  FlatParameters flat = flat_of(test::random_values(n, 1), test::random_values(m, 2));
  train::WeightAverage ema(flat, decay);
  std::vector<double> ref_p, ref_b;
  for (int64_t update = 1; update <= 6; ++update) {
    // The model moves (as an optimizer step would), then the average follows it.
    const std::vector<double> p = test::round_f32(test::random_values(n, 10 + uint64_t(update)));
    const std::vector<double> b = test::round_f32(test::random_values(m, 20 + uint64_t(update)));
    flat.params.copy_(test::f32_tensor(p, {n}));
    flat.buffers.copy_(test::f32_tensor(b, {m}));
    ema.update(flat, update);
    if (update == 1) {
      ref_p = p;
      ref_b = b;
    } else {
      for (size_t i = 0; i < ref_p.size(); ++i) ref_p[i] += (1 - decay) * (p[i] - ref_p[i]);
      for (size_t i = 0; i < ref_b.size(); ++i) ref_b[i] += (1 - decay) * (b[i] - ref_b[i]);
    }
    const auto tensors = ema.named_tensors();
    ASSERT_EQ(tensors.size(), 2u);
    EXPECT_EQ(tensors[0].name, "ema.params");
    EXPECT_TRUE(test::all_close(tensors[0].tensor, ref_p, test::Tolerance{1e-6, 1e-6}))
        << "update " << update;
    EXPECT_TRUE(test::all_close(tensors[1].tensor, ref_b, test::Tolerance{1e-6, 1e-6}))
        << "update " << update;
  }
}

TEST(WeightAverage, EvaluatesInTheModelsPlaceAndPutsItBack) {
  FlatParameters flat = flat_of({1, 2, 3}, {4, 5});
  train::WeightAverage ema(flat, 0.5);
  ema.update(flat, 1);
  flat.params.copy_(test::f32_tensor({3, 2, 1}, {3}));
  ema.update(flat, 2);  // the average: 2, 2, 2
  std::vector<float> seen;
  ema.with_average(flat, [&] { seen = flat.params.to_vector<float>(); });
  EXPECT_EQ(seen, (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(flat.params.to_vector<float>(), (std::vector<float>{3, 2, 1}));
  // Also when what runs in its place throws.
  EXPECT_THROW(ema.with_average(flat, [] { throw std::runtime_error("evaluation failed"); }),
               std::runtime_error);
  EXPECT_EQ(flat.params.to_vector<float>(), (std::vector<float>{3, 2, 1}));
  EXPECT_EQ(flat.buffers.to_vector<float>(), (std::vector<float>{4, 5}));
  // A checkpoint without the average is refused naming the tensor.
  SafetensorsFile file;
  file.path = "run/checkpoints/step-000000010.safetensors";
  test::expect_invalid([&] { ema.restore(file); }, {"step-000000010", "ema.params"});
}

// torch.optim.swa_utils.update_bn: the running statistics become the plain average of the
// batches' means and unbiased variances (float64 here); the layer's momentum and mode are kept.
TEST(WeightAverage, RecomputedBatchNormStatisticsAreTheBatchesPlainAverage) {
  nn::BatchNorm2d bn(3);
  bn.eval();
  const int64_t batches = 3, rows = 4 * 2 * 5, channels = 3;
  std::mt19937 gen(7);
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> data(batches);
  for (int64_t k = 0; k < batches; ++k)
    for (int64_t i = 0; i < rows * channels; ++i)  // channel c: mean c + k, spread 1 + c
      data[size_t(k)].push_back(
          double(float(double(i % channels + k) + (1.0 + double(i % channels)) * normal(gen))));
  EXPECT_EQ(
      nn::recompute_batch_norm_statistics(bn, batches,
                                          [&](int64_t k) {
                                            return test::f32_tensor(data[size_t(k)], {4, 2, 5, 3});
                                          }),
      1);
  const std::vector<float> mean = bn.running_mean.to_vector<float>();
  const std::vector<float> var = bn.running_var.to_vector<float>();
  for (int64_t c = 0; c < channels; ++c) {
    double want_mean = 0, want_var = 0;
    for (const std::vector<double>& x : data) {
      double m = 0, ss = 0;
      for (int64_t r = 0; r < rows; ++r) m += x[size_t(r * channels + c)];
      m /= double(rows);
      for (int64_t r = 0; r < rows; ++r) ss += std::pow(x[size_t(r * channels + c)] - m, 2);
      want_mean += m / double(batches);
      want_var += ss / double(rows - 1) / double(batches);
    }
    EXPECT_NEAR(mean[size_t(c)], want_mean, 1e-5 * (1 + std::abs(want_mean))) << "channel " << c;
    EXPECT_NEAR(var[size_t(c)], want_var, 1e-5 * want_var) << "channel " << c;
  }
  EXPECT_EQ(bn.momentum(), 0.1);
  EXPECT_FALSE(bn.is_training());
}

TEST(WeightAverage, ARunReportsItAndWritesItsWeights) {
  Config c = Config::parse(R"(
    seed = 3
    [model]
    name = "mlp"
    hidden = [16]
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 96, test_size = 32, height = 4, width = 4, channels = 1, classes = 3 }
    workers = 0
    [train]
    epochs = 2
    batch_size = 16
    ema_decay = 0.8
  )",
                           "ema.toml");
  train::TrainerOptions o{test::fresh_temp_dir("weight_average_run")};
  o.progress = false;
  train::Trainer t(c, o);
  const auto history = t.run();
  ASSERT_EQ(history.size(), 2u);
  for (const auto& m : history) {
    EXPECT_GE(m.ema_test_acc, 0.0);
    EXPECT_LE(m.ema_test_acc, 1.0);
    EXPECT_TRUE(std::isfinite(m.ema_test_loss));
  }
  const SafetensorsFile raw = load_safetensors(t.run_dir() + "/final.safetensors");
  const SafetensorsFile avg = load_safetensors(t.run_dir() + "/final_ema.safetensors");
  ASSERT_EQ(raw.tensors.size(), avg.tensors.size());
  EXPECT_NE(raw.tensors[0].tensor.to_vector<float>(), avg.tensors[0].tensor.to_vector<float>());
  EXPECT_EQ(avg.metadata.at("hourglass.ema_decay"), "0.8");
  std::ifstream metrics(t.run_dir() + "/metrics.jsonl");
  const std::string lines((std::istreambuf_iterator<char>(metrics)), {});
  EXPECT_NE(lines.find("\"ema_test_acc\":"), std::string::npos) << lines;
}

// A tiny ResNet on synthetic images, 2 epochs of 6 steps.
Config tiny_resnet_config() {
  return Config::parse(R"(
    seed = 3
    [model]
    name = "tiny_resnet"
    [data]
    dataset = "synthetic"
    synthetic = { train_size = 96, test_size = 32, height = 8, width = 8, channels = 3, classes = 3 }
    workers = 0
    [train]
    epochs = 2
    batch_size = 16
  )",
                       "tiny_resnet.toml");
}

// train.ema_batch_norm = "recompute": the training is the same run's to the bit (the average's
// statistics are recomputed in its place and the model's put back), the average's weights are
// the same, and its batch-norm statistics are the ones update_bn gives those weights on the
// epoch's first training batches, not the averaged ones.
TEST(WeightAverage, RecomputedStatisticsLeaveTheTrainingAndTheAveragedWeightsAlone) {
  auto run = [](const std::string& mode) {
    Config c = tiny_resnet_config();
    c.set_override("train.ema_decay=0.8");
    c.set_override("train.ema_batch_norm=\"" + mode + "\"");
    train::TrainerOptions o{test::fresh_temp_dir("weight_average_" + mode)};
    o.progress = false;
    train::Trainer t(c, o);
    const auto history = t.run();
    return std::pair{t.run_dir(), history};
  };
  const auto [averaged_dir, averaged] = run("average");
  const auto [recomputed_dir, recomputed] = run("recompute");
  ASSERT_EQ(averaged.size(), recomputed.size());
  for (size_t e = 0; e < averaged.size(); ++e) {
    EXPECT_EQ(averaged[e].train_loss, recomputed[e].train_loss) << "epoch " << e;
    EXPECT_EQ(averaged[e].test_loss, recomputed[e].test_loss) << "epoch " << e;
  }
  EXPECT_NE(averaged.back().ema_test_loss, recomputed.back().ema_test_loss);
  const SafetensorsFile a = load_safetensors(averaged_dir + "/final_ema.safetensors");
  const SafetensorsFile r = load_safetensors(recomputed_dir + "/final_ema.safetensors");
  const SafetensorsFile model = load_safetensors(recomputed_dir + "/final.safetensors");
  const SafetensorsFile model_a = load_safetensors(averaged_dir + "/final.safetensors");
  ASSERT_EQ(a.tensors.size(), r.tensors.size());
  int64_t statistics = 0;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const std::string& name = a.tensors[i].name;
    EXPECT_EQ(model.tensors[i].tensor.to_vector<float>(),
              model_a.tensors[i].tensor.to_vector<float>())
        << name;
    const bool running = name.find("running_") != std::string::npos;
    statistics += running;
    if (running)
      EXPECT_NE(a.tensors[i].tensor.to_vector<float>(), r.tensors[i].tensor.to_vector<float>())
          << name;
    else
      EXPECT_EQ(a.tensors[i].tensor.to_vector<float>(), r.tensors[i].tensor.to_vector<float>())
          << name;
  }
  EXPECT_GT(statistics, 0);
  // The average's weights and the first batch's statistics: the recomputation redone here.
  const Config c = tiny_resnet_config();
  train::TrainingSetup s = train::build_training(train::parse_run_config(c));
  std::map<std::string, Tensor> state;
  for (const NamedTensor& t : a.tensors) state[t.name] = t.tensor;
  s.parts.model->load_state_dict(state, "final_ema.safetensors");
  train::RunConfig rc = train::parse_run_config(c);
  auto loader = train::make_batch_norm_loader(rc, s.parts.train_set, nullptr, {});
  loader->start_epoch(1);  // the last evaluation's epoch (0-based)
  nn::recompute_batch_norm_statistics(*s.parts.model, 6,
                                      [&](int64_t) { return loader->next()->images; });
  const nn::NamedTensors buffers = s.parts.model->named_buffers();
  int64_t checked = 0;
  for (const NamedTensor& t : r.tensors)
    for (const auto& [name, buffer] : buffers)
      if (name == t.name) {
        EXPECT_EQ(buffer.to_vector<float>(), t.tensor.to_vector<float>()) << t.name;
        ++checked;
      }
  EXPECT_EQ(checked, statistics);
}

}  // namespace
}  // namespace hg
