// Data parallelism on two GPUs end to end: `hourglass launch --nproc 2 -- train` (two ranks,
// NCCL, one GPU each) against one `hourglass train` process on the same global batch, split
// into the ranks' rows as micro-batches (train.micro_batch = batch / 2). Each micro-batch k holds
// rank k's rows with the same loss weight, so what differs is the order in which the two
// gradients are added (a + b against b + a, the same bits) and the convolution algorithms each
// process's search picks among the deterministic ones (a different summation order): the
// weights agree within float rounding, and the test says how many tensors are the same bits.
// Skips on a machine with fewer than two GPUs (CI, the one-GPU device kind);
// scripts/gpu-check.sh gputest runs it wherever two are lent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "hourglass/device/device.h"
#include "hourglass/dist/comm.h"
#include "hourglass/tensor/safetensors.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

constexpr const char* kConfig = R"(seed = 5
device = "gpu:0"
precision = "fp32"
deterministic = true
[model]
name = "tiny_resnet"
[data]
dataset = "synthetic"
synthetic = { train_size = 256, test_size = 64, height = 8, width = 8, channels = 3, classes = 4 }
workers = 0
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
nesterov = true
weight_decay = 5e-4
[train]
epochs = 2
batch_size = 32
[distributed]
bucket_mb = 1
)";

// `ranks` NCCL ranks under hourglass launch against one process with micro-batches of a rank's
// rows.
void expect_ranks_train_the_weights_of_one_process(int ranks) {
  const std::string name = "hourglass_gpu_launch_nccl_np" + std::to_string(ranks);
  const std::string dir = test::fresh_temp_dir(name);
  const std::string config = dir + "/dp.toml";
  std::ofstream(config) << kConfig;
  const test::RunResult launched =
      test::run_hourglass("launch --nproc " + std::to_string(ranks) + " -- train " + config +
                          " --run-dir " + dir + "/ranks --no-progress");
  ASSERT_EQ(launched.code, 0) << launched.output;
  const test::RunResult one = test::run_hourglass(
      "train " + config + " --set train.micro_batch=" + std::to_string(32 / ranks) + " --run-dir " +
      dir + "/one --no-progress");
  ASSERT_EQ(one.code, 0) << one.output;
  const SafetensorsFile a = load_safetensors(dir + "/ranks/final.safetensors");
  const SafetensorsFile b = load_safetensors(dir + "/one/final.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  int same_bits = 0;
  double worst = 0;  // the largest difference relative to the tensor's largest value
  for (const NamedTensor& t : a.tensors) {
    SCOPED_TRACE(t.name);
    const Tensor& u = b.at(t.name);
    ASSERT_EQ(t.tensor.shape(), u.shape());
    ASSERT_EQ(t.tensor.dtype(), u.dtype());
    const size_t bytes = size_t(t.tensor.numel()) * dtype_size(t.tensor.dtype());
    if (std::memcmp(t.tensor.data_ptr(), u.data_ptr(), bytes) == 0) {
      ++same_bits;
      continue;
    }
    ASSERT_EQ(t.tensor.dtype(), DType::F32) << "only float tensors may differ by rounding";
    const std::vector<float> x = t.tensor.to_vector<float>(), y = u.to_vector<float>();
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(x[i]) && std::isfinite(y[i])) << "element " << i;
      diff = std::max(diff, double(std::abs(x[i] - y[i])));
      scale = std::max(scale, double(std::abs(y[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  EXPECT_LT(worst, 1e-4) << same_bits << " of " << a.tensors.size() << " tensors the same bits";
  std::printf(
      "%d rank(s) against one process: %d of %zu tensors the same bits, largest relative "
      "difference %.3g\n",
      ranks, same_bits, a.tensors.size(), worst);
}

TEST(GpuLaunch, TwoNcclRanksTrainTheWeightsOfOneProcessOnTheWholeBatch) {
  if (gpu_device_count() < 2) GTEST_SKIP() << "needs two GPUs (found " << gpu_device_count() << ")";
  if (!nccl_available()) GTEST_SKIP() << "built without NCCL";
  expect_ranks_train_the_weights_of_one_process(2);
}

// The same path with one rank: what a one-GPU machine can check of it.
TEST(GpuLaunch, OneNcclRankTrainsTheWeightsOfOneProcess) {
  if (gpu_device_count() < 1) GTEST_SKIP() << "needs a GPU";
  if (!nccl_available()) GTEST_SKIP() << "built without NCCL";
  expect_ranks_train_the_weights_of_one_process(1);
}

}  // namespace
}  // namespace hg
