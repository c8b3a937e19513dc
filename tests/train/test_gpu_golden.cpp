// The GPU golden checksums: a short deterministic training of a small ResNet-18 (ImageNet stem,
// so the stem's space-to-depth rewrite and its pixel pairs run too) on the GPU, in bf16 and in
// fp32, with the engine's default settings and graph replay, hashed (FNV-1a, 64 bits) over the
// bytes of its final f32 parameters and batch-norm buffers. tests/golden/gpu_checksums.txt
// records the hashes for each GPU model and library versions they were measured on. A change
// that moves the GPU arithmetic by one ulp anywhere in the step changes a hash and fails here
// until the line is updated on purpose in the same commit, and the recipes whose accuracy the
// project states are measured again (bench/speedrun.sh). On a GPU or library version without a
// recorded line the test skips, printing the lines to add. Runs on the GPU machine
// (scripts/gpu-check.sh gputest); skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/schedule.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/step/train_step.h"
#include "support/compare.h"
#include "support/gpu.h"

namespace hg {
namespace {

const char* kChecksums = HG_SOURCE_DIR "/tests/golden/gpu_checksums.txt";

uint64_t fnv1a(const std::vector<float>& values, uint64_t h = 14695981039346656037ull) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

// 8 SGD steps of a ResNet-18 of width 16 on 32x32 RGB batches of 16 (fixed random images and
// labels), deterministic algorithms, one-cycle, label smoothing; the hash of what it ends with.
std::string train_and_hash(optim::Precision precision) {
  const Device gpu = Device::gpu(0);
  nn::ModelSpec spec;
  spec.name = "resnet18";
  spec.stem = "imagenet";
  spec.in_channels = 3;
  spec.height = spec.width = 32;
  spec.num_classes = 10;
  spec.base_channels = 16;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 3);
  model->to(gpu);
  model->train();
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::WeightsOnly);
  SgdOptions o;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 5e-4;
  optim::Sgd sgd(flat, o);
  constexpr int kSteps = 8;
  constexpr int64_t kRows = 16;
  optim::OneCycleSchedule schedule(0.4, kSteps, 0.3, 25, 1e4, true);
  train::ExecutionContext context;
  context.device = gpu;
  context.precision = precision;
  context.deterministic = true;
  train::StepOptions options;
  options.micro_batch = kRows;
  options.label_smoothing = 0.1;
  options.schedule = &schedule;
  train::TrainStep step(*model, sgd, context, options);
  for (int i = 0; i < kSteps; ++i) {
    std::vector<int64_t> labels(kRows);
    for (int64_t r = 0; r < kRows; ++r) labels[size_t(r)] = (r * 7 + i) % 10;
    const Tensor x =
        test::f32_tensor(test::random_values(kRows * 32 * 32 * 3, 200 + i), {kRows, 32, 32, 3})
            .to(gpu);
    step.run(x, Tensor::from_vector(labels, {kRows}).to(gpu));
  }
  const std::vector<float> params = flat.params.to_vector<float>();
  for (float v : params) EXPECT_TRUE(std::isfinite(v));
  return fmt::format("{:016x}", fnv1a(flat.buffers.to_vector<float>(), fnv1a(params)));
}

// The recorded "<identity> | <workload> | <hash>" lines of the checksum file, by identity and
// workload.
std::map<std::string, std::string> recorded() {
  std::map<std::string, std::string> out;
  std::ifstream in(kChecksums);
  EXPECT_TRUE(in.good()) << kChecksums;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t a = line.find(" | "), b = line.rfind(" | ");
    EXPECT_TRUE(a != std::string::npos && b > a)
        << "malformed line in " << kChecksums << ": " << line;
    if (a == std::string::npos || b <= a) continue;
    out[line.substr(0, b)] = line.substr(b + 3);
  }
  return out;
}

TEST(GpuGolden, ShortTrainingsMatchTheRecordedChecksums) {
  HG_REQUIRE_GPU();
  const std::string identity = test::gpu_arithmetic_identity();
  const std::map<std::string, std::string> lines = recorded();
  std::vector<std::string> missing;
  for (optim::Precision p : {optim::Precision::BF16, optim::Precision::FP32}) {
    const std::string key =
        fmt::format("{} | resnet18-imagenet-w16-32px {}", identity, optim::precision_name(p));
    const std::string hash = train_and_hash(p);
    // The same run twice gives the same bits (deterministic algorithms), or no checksum could.
    ASSERT_EQ(train_and_hash(p), hash) << key;
    std::printf("golden: %s | %s\n", key.c_str(), hash.c_str());
    auto it = lines.find(key);
    if (it == lines.end()) {
      missing.push_back(key + " | " + hash);
      continue;
    }
    EXPECT_EQ(hash, it->second)
        << key << ": the GPU arithmetic changed. If on purpose, record the new value in "
        << kChecksums << " in the same commit and measure the stated recipes again";
  }
  if (!missing.empty()) {
    std::string text;
    for (const std::string& m : missing) text += m + "\n";
    GTEST_SKIP() << "no checksum recorded for this GPU and these libraries; add to " << kChecksums
                 << ":\n"
                 << text;
  }
}

}  // namespace
}  // namespace hg
