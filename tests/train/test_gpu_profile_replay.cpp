// The op profiler on graph-replayed training steps (train/step/step_graph.h, ops/op_profile.h), on
// the GPU with CUPTI: with the profiler installed after the graph was captured, the next step
// captures it again and the profiled steps replay (not eager); every op row has the calls of
// the same model's profiled eager steps; kernels are attributed to ops (a small share of the
// kernel time outside any op: the batch's copies into the graph's inputs); every device time
// is finite. Skips without a GPU, without libcupti, or where CUPTI's one callback subscriber
// is held by another tool (nsys).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <sstream>

#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/obs/op_profile_report.h"
#include "hourglass/ops/op_profile.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/step/train_step.h"
#include "support/compare.h"
#include "support/gpu.h"

namespace hg {
namespace {

using train::GraphMode;

constexpr int kWarmup = 3;  // step 2 captures the graph (unprofiled), 3 replays it
constexpr int kProfiled = 4;
constexpr int64_t kRows = 16;

struct Profiled {
  obs::OpProfileSummary summary;
  std::map<std::string, int64_t> calls;  // op rows: "name|parent" -> calls
  int64_t graph_replays = 0;             // StepGraph replays during the profiled steps
  int64_t profiler_replays = 0;          // replays the profiler recorded
  std::string eager_reason;              // TrainStep's, with the profiler installed
  std::string timing, graph_note;
  size_t kernels = 0, kernels_outside = 0;
  bool finite = true;
  std::string not_finite;
};

// A ResNet-18 (CIFAR stem, narrow) trained with SGD on new batches: kWarmup steps unprofiled,
// then one profiled step recorded and forgotten (under replay: the capture again), then
// kProfiled profiled steps.
Profiled profile_steps(GraphMode graph) {
  const Device gpu = Device::gpu(0);
  nn::ModelSpec spec;
  spec.name = "resnet18";
  spec.in_channels = 3;
  spec.height = spec.width = 16;
  spec.num_classes = 10;
  spec.base_channels = 16;
  auto model = nn::make_model(spec);
  nn::initialize(*model, 11);
  model->to(gpu);
  model->train();
  FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::WeightsOnly);
  SgdOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  optim::Sgd optimizer(flat, o);
  train::ExecutionContext context;
  context.device = gpu;
  context.precision = optim::Precision::BF16;
  train::StepOptions options;
  options.micro_batch = kRows;
  options.graph = graph;
  train::TrainStep step(*model, optimizer, context, options);
  auto run = [&](int i) {
    std::vector<int64_t> labels(kRows);
    for (int64_t r = 0; r < kRows; ++r) labels[size_t(r)] = (r + i) % 10;
    const Tensor x =
        test::f32_tensor(test::random_values(kRows * 16 * 16 * 3, 300 + i), {kRows, 16, 16, 3})
            .to(gpu);
    const Tensor y = Tensor::from_vector(labels, {kRows}).to(gpu);
    step.run(x, y);
  };
  for (int i = 0; i < kWarmup; ++i) run(i);
  Profiled out;
  ops::OpProfiler profiler(gpu, ops::DeviceTiming::KernelActivity);
  out.timing = profiler.timing_note();
  out.graph_note = profiler.graph_note();
  if (!profiler.profiles_graphs()) return out;
  profiler.install();
  run(kWarmup);  // the graph captured again with the profiler installed
  (void)step.last_loss().item();
  profiler.clear();
  out.eager_reason = step.eager_reason();
  const int64_t before = step.graph() ? step.graph()->replays() : 0;
  for (int i = 0; i < kProfiled; ++i) run(kWarmup + 1 + i);
  const double loss = step.last_loss().item();
  profiler.uninstall();
  out.graph_replays = (step.graph() ? step.graph()->replays() : 0) - before;
  out.profiler_replays = profiler.replays();
  if (!std::isfinite(loss)) out.finite = false, out.not_finite += " the last loss;";
  for (const ops::OpEvent& e : profiler.events()) {
    const double ms = profiler.device_ms(e);
    if (!std::isfinite(ms) || ms < 0) {
      out.finite = false;
      out.not_finite += std::string(" ") + e.name + ";";
    }
  }
  for (const KernelRecord& k : profiler.kernels()) {
    ++out.kernels;
    if (k.op_id == 0) ++out.kernels_outside;
  }
  out.summary = obs::summarize(profiler);
  for (const obs::OpProfileRow& r : out.summary.rows)
    if (r.kind == obs::ProfileRowKind::Op && r.name != "(outside ops)")
      out.calls[r.name + "|" + r.parent] = r.calls;
  return out;
}

std::string describe(const std::map<std::string, int64_t>& calls) {
  std::ostringstream s;
  for (const auto& [name, n] : calls) s << "\n  " << name << ": " << n;
  return s.str();
}

TEST(GpuProfileReplay, ProfiledStepsReplayWithTheEagerStepsOpsAndCalls) {
  HG_REQUIRE_GPU();
  const Profiled eager = profile_steps(GraphMode::Off);
  if (eager.timing.find("CUPTI") == std::string::npos)
    GTEST_SKIP() << "no kernel activity here: " << eager.timing;
  if (!eager.graph_note.empty())
    GTEST_SKIP() << "CUPTI's graph-node callbacks are unavailable: " << eager.graph_note;
  const Profiled replayed = profile_steps(GraphMode::Auto);
  ASSERT_TRUE(replayed.eager_reason.empty())
      << "profiled steps were to replay, but TrainStep says: " << replayed.eager_reason
      << " (timing: " << replayed.timing << ")";
  EXPECT_EQ(replayed.graph_replays, kProfiled)
      << "the profiled steps did not all replay the graph (timing: " << replayed.timing << ")";
  EXPECT_EQ(replayed.profiler_replays, kProfiled)
      << "the profiler recorded another number of replays than the step graph ran";
  EXPECT_EQ(eager.graph_replays, 0);

  EXPECT_TRUE(eager.finite) << "eager: not finite:" << eager.not_finite;
  EXPECT_TRUE(replayed.finite) << "replayed: not finite:" << replayed.not_finite;
  ASSERT_FALSE(eager.calls.empty()) << "the eager steps recorded no ops";
  EXPECT_EQ(replayed.calls, eager.calls)
      << "op rows differ (name|parent: calls over " << kProfiled
      << " steps)\neager:" << describe(eager.calls) << "\nreplayed:" << describe(replayed.calls);

  // Kernels attributed to ops as well as in eager steps: the replayed steps' kernel time outside
  // any op is at most the eager steps' (work the step issues outside the ops, e.g. its memsets,
  // a sizeable share on this tiny model) plus the batch's copies into the graph's inputs.
  ASSERT_GT(replayed.kernels, 0u) << "no kernel records from the replayed steps";
  const double all_ms = replayed.summary.top_level_ms + replayed.summary.outside_ops_ms;
  ASSERT_GT(replayed.summary.top_level_ms, 0) << "the replayed ops got no device time";
  EXPECT_LT(replayed.summary.outside_ops_ms, 1.25 * eager.summary.outside_ops_ms + 0.02 * all_ms)
      << "replayed: " << replayed.kernels_outside << " of " << replayed.kernels
      << " kernels outside any op, " << replayed.summary.outside_ops_ms << " of " << all_ms
      << " ms; eager: " << eager.kernels_outside << " of " << eager.kernels << " outside, "
      << eager.summary.outside_ops_ms << " ms";
  EXPECT_LE(replayed.kernels_outside, eager.kernels_outside + size_t(2 * kProfiled))
      << "replayed: " << replayed.kernels_outside << " of " << replayed.kernels
      << " kernels outside any op; eager: " << eager.kernels_outside << " of " << eager.kernels;
  // Each op's device time is of the same order in both (a replay removes gaps, not kernels).
  EXPECT_GT(replayed.summary.top_level_ms, 0.3 * eager.summary.top_level_ms)
      << "replayed ops " << replayed.summary.top_level_ms << " ms, eager "
      << eager.summary.top_level_ms << " ms";
}

}  // namespace
}  // namespace hg
