// The weights' moving average (train.ema_decay, step/weight_average.h) against a float64
// transcription of torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn(decay) and
// use_buffers=True: the first update copies, each later one is a lerp towards the model by
// (1 - decay); evaluation in its place puts the model's own values back; a trained run reports
// it and writes final_ema.safetensors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

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

}  // namespace
}  // namespace hg
