// Captured device work (device/captured_work.h over gpu/graph.h) and the allocator's graph
// pools: a graph replays its recorded work on new input values, nothing runs at capture, its
// intermediate buffers keep their addresses while other work allocates between replays, and a
// capture broken by a wait for the device fails cleanly, leaving the stream usable; fills that
// the runtime records as memset nodes (turned into kernel nodes when small, gpu/graph.cpp)
// write the same bytes on every replay, and those into memory of the graph's own that come
// first on it move to the graph's start with every other ordering kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "hourglass/device/allocator.h"
#include "hourglass/device/captured_work.h"
#include "hourglass/device/memory_plan.h"
#include "hourglass/ops/ops.h"
#include "hourglass/tensor/tensor.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/graph.h"
#endif

namespace hg {
namespace {

TEST(CapturedWork, TheCpuHasNothingToCapture) {
  EXPECT_FALSE(CapturedWork::supported(Device::cpu()));
  test::expect_invalid([] { CapturedWork work(Device::cpu(), [] {}); }, {"cpu", "no graphs"});
}

// No two requests living at the same time share a byte, every offset is aligned, and the
// block is at least what they hold at once.
void expect_valid(const std::vector<TracedRequest>& requests, const MemoryPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % 512, 0u);
    EXPECT_LE(plan.offsets[i] + requests[i].size, plan.bytes);
    for (size_t j = i + 1; j < requests.size(); ++j)
      if (requests[i].live_together(requests[j]))
        EXPECT_TRUE(plan.offsets[i] + requests[i].size <= plan.offsets[j] ||
                    plan.offsets[j] + requests[j].size <= plan.offsets[i])
            << "requests " << i << " and " << j << " overlap";
  }
  EXPECT_GE(plan.bytes, plan.most_held);
}

TEST(MemoryPlan, RequestsLivingApartShareTheirBytes) {
  // a [0,2) and b [1,3) live together; c [4,5) after both; d, never freed, after c.
  const std::vector<TracedRequest> requests = {
      {1024, 0, 2}, {512, 1, 3}, {1536, 4, 5}, {512, 6, TracedRequest::kNeverFreed}};
  const MemoryPlan plan = plan_memory(requests, 512);
  expect_valid(requests, plan);
  EXPECT_EQ(plan.offsets[2], 0u);
  EXPECT_EQ(plan.offsets[3], 0u) << "d shares c's bytes";
  EXPECT_EQ(plan.most_held, 1536u);  // a and b, or c
  EXPECT_EQ(plan.bytes, 1536u);
  EXPECT_TRUE(plan_memory({}, 512).offsets.empty());
  // The peak: a and b together from event 1 (c alone holds as much later, not more).
  const MemoryPeak peak = peak_of(requests);
  EXPECT_EQ(peak.bytes, 1536u);
  EXPECT_EQ(peak.event, 1);
  EXPECT_EQ(peak.live, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(peak_of({}).bytes, 0u);
}

TEST(MemoryPlan, ATrainingStepsPatternFitsNearTheMostItHolds) {
  // A forward pass keeps activations of many sizes that the backward pass frees in reverse,
  // with short-lived temporaries (workspaces, gradients) between: the block stays within a
  // fifth of the lower bound, where one cache per size would hold far more.
  std::mt19937 rng(7);
  std::vector<TracedRequest> requests;
  std::vector<size_t> stack;
  int64_t event = 0;
  auto make = [&](size_t size) {
    requests.push_back({size, event++, TracedRequest::kNeverFreed});
    return requests.size() - 1;
  };
  for (int layer = 0; layer < 40; ++layer) {
    stack.push_back(make(512 * (1 + rng() % 64)));
    const size_t workspace = make(512 * (1 + rng() % 16));
    requests[workspace].freed = event++;
  }
  while (!stack.empty()) {
    const size_t gradient = make(requests[stack.back()].size);
    const size_t workspace = make(512 * (1 + rng() % 16));
    requests[workspace].freed = event++;
    requests[stack.back()].freed = event++;
    requests[gradient].freed = event++;
    stack.pop_back();
  }
  const MemoryPlan plan = plan_memory(requests, 512);
  expect_valid(requests, plan);
  EXPECT_LE(double(plan.bytes), 1.2 * double(plan.most_held));
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

// Work whose temporaries differ in size: a graph captured with a trace of it run eagerly lays
// them out in one block, smaller than the per-size pool without it, and replays the same.
TEST(GpuCapturedWork, ATracedRunLaysTheGraphsBuffersOutInOneBlock) {
  HG_REQUIRE_GPU();
  const Device gpu = Device::gpu(0);
  constexpr int64_t kN = 1 << 16;
  Tensor x = Tensor::full({kN}, 1.0, DType::F32, gpu);
  Tensor y = Tensor::zeros({kN}, DType::F32, gpu);
  Tensor kept;
  auto work = [&] {
    Tensor t = x;
    for (int64_t k = 1; k <= 6; ++k) {
      Tensor scratch = Tensor::full({kN * k}, double(k), DType::F32, gpu);  // one size each
      t = ops::add(t, x);
    }
    kept = ops::add(t, x);  // held after the work: served outside the block
    y.copy_(t);
  };
  MemoryTrace trace(gpu);
  work();
  const std::vector<TracedRequest> requests = trace.finish();
  ASSERT_GE(requests.size(), 13u);
  EXPECT_EQ(y.to_vector<float>()[0], 7.0f);
  CapturedWork per_size(gpu, work);
  CapturedWork planned(gpu, work, requests);
  const CapturedWork::PlannedMemory use = planned.planned_memory();
  EXPECT_GT(use.bytes, 0u);
  EXPECT_GE(use.placed, 12);
  EXPECT_LT(planned.memory_bytes(), per_size.memory_bytes());
  EXPECT_EQ(per_size.planned_memory().bytes, 0u);
  for (int round = 2; round <= 4; ++round) {
    x.fill_(double(round));
    y.zero_();
    planned.replay();
    EXPECT_EQ(ops::sum(y).item(), double(7 * round * kN)) << "round " << round;
    EXPECT_EQ(ops::sum(kept).item(), double(8 * round * kN)) << "round " << round;
  }
}

TEST(GpuCapturedWork, FillsAreReplayedSmallAndLarge) {
  HG_REQUIRE_GPU();
  const Device gpu = Device::gpu(0);
  // Uniform byte patterns go to the runtime's memset: 0 and -1 (all bits set), over 1 value, a
  // few odd ones, and 64 Ki values (256 KiB, left a memset node).
  Tensor one = Tensor::full({1}, 5.0, DType::I32, gpu);
  Tensor odd = Tensor::full({7}, 5.0, DType::I32, gpu);
  Tensor bytes = Tensor::full({13}, 5.0, DType::U8, gpu);
  Tensor large = Tensor::full({1 << 16}, 5.0, DType::F32, gpu);
  Tensor sum_after;  // read after the fills, in the graph
  CapturedWork work(gpu, [&] {
    one.zero_();
    odd.fill_(-1.0);
    bytes.zero_();
    large.zero_();
    sum_after = ops::add(large, Tensor::full({1 << 16}, 2.0, DType::F32, gpu));
  });
  for (int round = 0; round < 2; ++round) {
    for (Tensor* t : {&one, &odd, &bytes, &large}) t->fill_(3.0);
    work.replay();
    EXPECT_EQ(one.to_vector<int32_t>(), std::vector<int32_t>{0});
    EXPECT_EQ(odd.to_vector<int32_t>(), std::vector<int32_t>(7, -1));
    EXPECT_EQ(bytes.to_vector<uint8_t>(), std::vector<uint8_t>(13, 0));
    EXPECT_EQ(ops::sum(large).item(), 0.0);
    EXPECT_EQ(ops::sum(sum_after).item(), double(2 << 16)) << "the add ran after the fill";
  }
}

#ifdef HOURGLASS_HAS_GPU
// New memory the graph keeps as its own (as dnn_cudnn.cpp keeps cuDNN's small workspaces).
Tensor graphs_own(int64_t n) {
  Tensor t;
  {
    gpu::FreshPoolBlocks fresh;
    t = Tensor::empty({n}, DType::F32, Device::gpu(0));
  }
  EXPECT_TRUE(gpu::keep_for_graph(t.data_ptr(), t.nbytes(), std::make_shared<const Tensor>(t)));
  return t;
}

// A memset that is the first work on memory of the graph's own moves to the graph's start; one
// after other work on that memory, or into memory of others', stays in place. The work before
// the moved memset still comes before the work after it: the sum reads what the add wrote,
// each round's (a sum run at the graph's start would see the round before's).
void check_memsets_moved(bool poisoned) {
  const Device gpu = Device::gpu(0);
  gpu::GraphPool pool(0);
  constexpr int64_t kBig = int64_t(1) << 24;  // 64 MiB: the add takes tens of microseconds
  Tensor big = Tensor::full({kBig}, 1.0, DType::F32, gpu);
  Tensor shared = Tensor::full({7}, 5.0, DType::F32, gpu);
  Tensor first, later, total, sum;
  gpu::CapturedGraph graph(0, pool, [&] {
    const Tensor doubled = ops::add(big, big);
    first = graphs_own(7);
    first.zero_();  // moves, unless the poison fill of its block came first
    total = ops::sum(doubled);
    later = graphs_own(7);
    later.copy_(shared);
    later.zero_();   // stays: the copy wrote that memory first
    shared.zero_();  // stays: not the graph's own
    sum = ops::add(ops::add(first, later), Tensor::full({7}, 2.0, DType::F32, gpu));
  });
  EXPECT_GE(graph.memsets_replaced(), 3u);
  EXPECT_EQ(graph.memsets_moved(), poisoned ? 0u : 1u);
  EXPECT_FALSE(gpu::keep_for_graph(first.data_ptr(), first.nbytes(), nullptr)) << "not recording";
  for (int round = 1; round <= 3; ++round) {
    big.fill_(double(round));
    for (Tensor* t : {&first, &later, &shared, &sum}) t->fill_(3.0);
    graph.launch();
    EXPECT_EQ(first.to_vector<float>(), std::vector<float>(7, 0.0f)) << "round " << round;
    EXPECT_EQ(later.to_vector<float>(), std::vector<float>(7, 0.0f)) << "round " << round;
    EXPECT_EQ(shared.to_vector<float>(), std::vector<float>(7, 0.0f)) << "round " << round;
    EXPECT_EQ(sum.to_vector<float>(), std::vector<float>(7, 2.0f)) << "round " << round;
    const double expected = double(2 * round) * double(kBig);
    EXPECT_NEAR(total.item(), expected, expected * 1e-4) << "round " << round;
  }
}

TEST(GpuCapturedGraph, FirstMemsetsIntoTheGraphsOwnMemoryMoveToItsStart) {
  HG_REQUIRE_GPU();
  check_memsets_moved(/*poisoned=*/false);
}

TEST(GpuCapturedGraph, AMemsetOverlappingAnotherStaysInPlace) {
  HG_REQUIRE_GPU();
  test::PoisonGuard poison;  // every new block is first filled: a second memset on it
  check_memsets_moved(/*poisoned=*/true);
}
#endif

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
