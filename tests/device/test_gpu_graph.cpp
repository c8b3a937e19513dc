// Captured device work (device/captured_work.h over gpu/graph.h) and the allocator's graph
// pools: a graph replays its recorded work on new input values, nothing runs at capture, its
// intermediate buffers keep their addresses while other work allocates between replays, and a
// capture broken by a wait for the device fails cleanly, leaving the stream usable.
#include <gtest/gtest.h>

#include "hourglass/device/allocator.h"
#include "hourglass/device/captured_work.h"
#include "hourglass/ops/ops.h"
#include "hourglass/tensor/tensor.h"
#include "support/expect_error.h"
#include "support/gpu.h"

namespace hg {
namespace {

TEST(CapturedWork, TheCpuHasNothingToCapture) {
  EXPECT_FALSE(CapturedWork::supported(Device::cpu()));
  test::expect_invalid([] { CapturedWork work(Device::cpu(), [] {}); }, {"cpu", "no graphs"});
}

TEST(GpuCapturedWork, ReplaysOnNewInputsWithItsOwnMemory) {
  HG_REQUIRE_GPU();
  const Device gpu = Device::gpu(0);
  constexpr int64_t kN = 1 << 16;
  Tensor x = Tensor::full({kN}, 1.0, DType::F32, gpu);
  Tensor y = Tensor::zeros({kN}, DType::F32, gpu);
  Tensor kept;  // allocated inside the capture, kept after it
  Allocator& allocator = allocator_for(gpu);
  const size_t in_use_before = allocator.stats().in_use;
  CapturedWork work(gpu, [&] {
    Tensor doubled = ops::add(x, x);  // a temporary of the graph
    kept = ops::add(doubled, x);      // 3x
    y.copy_(doubled);
  });
  EXPECT_GT(work.nodes(), 0u);
  EXPECT_GE(work.memory_bytes(), size_t(2 * kN * 4));
  EXPECT_EQ(ops::sum(y).item(), 0.0) << "the capture ran the work";
  // The temporary's block is free in the pool but still counted in use: the graph owns it.
  EXPECT_GE(allocator.stats().in_use, in_use_before + work.memory_bytes());
  for (int round = 1; round <= 3; ++round) {
    x.fill_(double(round));
    // Requests between replays get other blocks than the graph's, which the replay rewrites.
    Tensor other = Tensor::full({kN}, -7.0, DType::F32, gpu);
    work.replay();
    EXPECT_EQ(ops::sum(y).item(), double(2 * round * kN));
    EXPECT_EQ(ops::sum(kept).item(), double(3 * round * kN));
    EXPECT_EQ(ops::sum(other).item(), double(-7 * kN)) << "round " << round;
  }
}

TEST(GpuCapturedWork, AWaitForTheDeviceBreaksTheCaptureCleanly) {
  HG_REQUIRE_GPU();
  const Device gpu = Device::gpu(0);
  Tensor x = Tensor::full({1024}, 2.0, DType::F32, gpu);
  // item() copies to the host and waits for the stream: not allowed while capturing.
  EXPECT_THROW(CapturedWork(gpu, [&] { (void)ops::sum(x).item(); }), Error);
  // The stream is usable again and nothing of the capture ran.
  EXPECT_EQ(ops::sum(x).item(), 2048.0);
}

}  // namespace
}  // namespace hg
