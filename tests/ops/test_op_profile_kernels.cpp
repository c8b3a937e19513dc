// The op profiler with kernel activity, through a fake libcupti (device/fakes/fake_cupti.cpp,
// CUDA builds; HOURGLASS_CUPTI_LIBRARY): kernels attributed to the op whose scope launched them
// (inner ops' kernels counted in their parent's time, kernels outside any op kept apart), no
// marks recorded, names demangled and shortened, the table's kernel rows under their op, the
// trace's kernel row; the fallback to marks when the library is absent or refuses; graph
// replays (a capture's ops kept as a template, each replay's kernels attributed through their
// graph node to that replay's copies of the ops), and eager steps where CUPTI's one subscriber
// is taken. Then, in
// every build: the FLOP and byte counts of the main ops against hand-computed values, the peaks
// from device properties, and the rates in the table.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "hourglass/device/kernel_activity.h"
#include "hourglass/obs/op_profile_report.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/ops/op_cost.h"
#include "hourglass/ops/op_profile.h"
#include "hourglass/ops/ops.h"

namespace hg {
namespace {

// ---- names ----

TEST(KernelNames, DemangledAndShortened) {
  EXPECT_EQ(demangle_kernel_name("_Z10add_kernelPfPKfS1_i"),
            "add_kernel(float*, float const*, float const*, int)");
  EXPECT_EQ(demangle_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32"),
            "sm90_xmma_gemm_bf16bf16_bf16f32");
  const std::string cudnn =
      "void cudnn::detail::implicit_convolve_sgemm<float, 1024, 5, 5, 3, 3, 3, 1, false, true>"
      "(int, int, float const*, float*, cudnn::detail::params<float>)";
  EXPECT_EQ(short_kernel_name(cudnn, 60), "cudnn::detail::implicit_convolve_sgemm<…>");
  EXPECT_EQ(short_kernel_name(cudnn, 30), "implicit_convolve_sgemm<…>");
  EXPECT_EQ(short_kernel_name(cudnn, 12), "implicit_co…");
  EXPECT_EQ(short_kernel_name("add_kernel(float*, int)", 40), "add_kernel");
  EXPECT_EQ(short_kernel_name("(anonymous namespace)::fill<float>(float*)", 40),
            "(anonymous namespace)::fill<float>");  // fits: kept whole
  EXPECT_EQ(short_kernel_name("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_"
                              "nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::"
                              "Params)",
                              40),
            "cutlass_80_tensorop_s1688gemm_128x128_3…");  // named by what it wraps
  EXPECT_EQ(short_kernel_name("plain_c_kernel", 40), "plain_c_kernel");
}

// ---- FLOPs and bytes ----

TEST(OpCost, ConvolutionsByHand) {
  // x [2,9,9,6], w [4,3,3,6], stride 2, pad 1 -> y [2,5,5,4].
  const Tensor x = Tensor::zeros({2, 9, 9, 6});
  const Tensor w = Tensor::zeros({4, 3, 3, 6});
  const Tensor b = Tensor::zeros({4});
  Conv2dParams p;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  ops::MathSettingsScope exact(ops::MathSettings{});
  const ops::OpCost f = ops::conv2d_cost(x, w, b, p);
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 2 * 5 * 5 * 4 * 6 * 3 * 3);  // 2*N*P*Q*K*C*R*S = 21600
  EXPECT_DOUBLE_EQ(f.bytes, 4.0 * (2 * 9 * 9 * 6 + 4 * 3 * 3 * 6 + 4 + 2 * 5 * 5 * 4));
  EXPECT_EQ(f.precision, MathPrecision::F32);
  // Grouped: C/groups input channels per output channel.
  Conv2dParams g = p;
  g.groups = 2;
  EXPECT_DOUBLE_EQ(ops::conv2d_cost(x, Tensor::zeros({4, 3, 3, 3}), Tensor(), g).flops,
                   2.0 * 2 * 5 * 5 * 4 * 3 * 3 * 3);
  const Tensor dy = Tensor::zeros({2, 5, 5, 4});
  const ops::OpCost wgrad =
      ops::conv2d_backward_cost(dy, x, w, /*has_bias=*/false, InputGrad::Skip);
  EXPECT_DOUBLE_EQ(wgrad.flops, 21600);
  EXPECT_DOUBLE_EQ(wgrad.bytes, 4.0 * (200 + 972 + 216));  // dy, x read; dw written
  const ops::OpCost both = ops::conv2d_backward_cost(dy, x, w, true, InputGrad::Compute);
  EXPECT_DOUBLE_EQ(both.flops, 2 * 21600 + 200);  // two passes and the bias sums
  EXPECT_DOUBLE_EQ(both.bytes, 4.0 * (2 * (200 + 972 + 216) + 200 + 4));
}

TEST(OpCost, LinearAndElementwiseByHand) {
  const Tensor x = Tensor::zeros({8, 5});
  const Tensor w = Tensor::zeros({3, 5});
  ops::MathSettings tf32;
  tf32.allow_tf32 = true;
  ops::MathSettingsScope scope(tf32);
  const ops::OpCost f = ops::linear_cost(x, w, Tensor());
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 8 * 5 * 3);
  EXPECT_DOUBLE_EQ(f.bytes, 4.0 * (40 + 15 + 24));
  EXPECT_EQ(f.precision, MathPrecision::TF32);
  const Tensor dy = Tensor::zeros({8, 3});
  const ops::OpCost bwd = ops::linear_backward_cost(dy, x, w, true, InputGrad::Compute);
  EXPECT_DOUBLE_EQ(bwd.flops, 2 * 240.0 + 24);
  EXPECT_DOUBLE_EQ(bwd.bytes, 4.0 * (2 * (24 + 40 + 15) + 24 + 3));
  const ops::OpCost add = ops::elementwise_cost(x, 2, 1);
  EXPECT_DOUBLE_EQ(add.flops, 0);
  EXPECT_DOUBLE_EQ(add.bytes, 3 * 160.0);
}

TEST(OpCost, RecordedOnlyWhileProfiling) {
  const Tensor a = Tensor::full({16, 16}, 1.0);
  ops::OpProfiler profiler(Device::cpu());
  profiler.install();
  (void)ops::add(a, a);
  (void)ops::linear(a, a, Tensor());
  profiler.uninstall();
  ASSERT_EQ(profiler.events().size(), 2u);
  EXPECT_DOUBLE_EQ(profiler.events()[0].cost.bytes, 3 * 256 * 4.0);
  EXPECT_DOUBLE_EQ(profiler.events()[1].cost.flops, 2.0 * 16 * 16 * 16);
}

TEST(DevicePeaks, FromPropertiesAndTheArchitectureTable) {
  // H200 SXM as the CUDA runtime reports it: 132 SMs, 1980 MHz, 3201 MHz memory, 6144 bits.
  const DevicePeaks h200 = device_peaks("sm_90", 132, 1980, 3201, 6144);
  EXPECT_NEAR(h200.bf16_tflops, 989.4, 0.5);
  EXPECT_NEAR(h200.tf32_tflops, 494.7, 0.5);
  EXPECT_NEAR(h200.f32_tflops, 66.9, 0.1);
  EXPECT_NEAR(h200.memory_gbps, 4917, 1);  // 2 x 3201 MHz x 768 bytes
  const DevicePeaks a100 = device_peaks("sm_80", 108, 1410, 1215, 5120);
  EXPECT_NEAR(a100.bf16_tflops, 311.9, 0.5);
  EXPECT_NEAR(a100.memory_gbps, 1555, 1);
  const DevicePeaks unknown = device_peaks("sm_75", 40, 1590, 5001, 256);
  EXPECT_EQ(unknown.bf16_tflops, 0);  // no table entry: the table shows "—"
  EXPECT_GT(unknown.memory_gbps, 0);
  EXPECT_EQ(peaks_of(Device::cpu()).memory_gbps, 0);
}

TEST(OpProfileTable, RatesAgainstPeaksAndDashesWhereUnknown) {
  const Tensor a = Tensor::full({64, 64}, 1.0);
  ops::OpProfiler profiler(Device::cpu());
  profiler.install();
  (void)ops::linear(a, a, Tensor());
  (void)ops::mean(a);  // no cost recorded
  profiler.uninstall();
  DevicePeaks peaks;
  peaks.f32_tflops = 1e-3;  // small, so the CPU reaches a share of it
  peaks.memory_gbps = 1;
  const obs::OpProfileSummary s = obs::summarize(profiler, peaks);
  const std::string table = obs::format_table(s, 0, 0);
  EXPECT_NE(table.find("TFLOP/s"), std::string::npos) << table;
  EXPECT_NE(table.find("—"), std::string::npos) << table;  // mean: no FLOPs, no bytes
  for (const obs::OpProfileRow& r : s.rows) {
    if (r.name != "linear") continue;
    EXPECT_DOUBLE_EQ(r.flops, 2.0 * 64 * 64 * 64);
    EXPECT_DOUBLE_EQ(r.peak_tflops, 1e-3);
    EXPECT_NEAR(r.tflops(), r.flops / (r.total_ms * 1e-3) / 1e12, 1e-12);
    EXPECT_NE(table.find("%)"), std::string::npos) << table;
  }
  const nlohmann::json j = nlohmann::json::parse(obs::profile_json(s, {}));
  EXPECT_EQ(j["rows"][0]["kind"], "op");
  EXPECT_TRUE(j["rows"][0].contains("tflops"));
}

// ---- kernel activity through the fake libcupti ----

#ifdef HG_FAKE_CUPTI

class FakeCupti : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("HOURGLASS_CUPTI_LIBRARY", HG_FAKE_CUPTI, 1);
    lib_ = dlopen(HG_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    launch_ = reinterpret_cast<Launch>(dlsym(lib_, "fake_cupti_launch"));
    enabled_ = reinterpret_cast<int (*)(int)>(dlsym(lib_, "fake_cupti_enabled"));
    graph_node_ = reinterpret_cast<void (*)(uint64_t)>(dlsym(lib_, "fake_cupti_graph_node"));
    graph_clone_ =
        reinterpret_cast<void (*)(uint64_t, uint64_t)>(dlsym(lib_, "fake_cupti_graph_clone"));
    graph_launch_ = reinterpret_cast<void (*)(const uint64_t*, int, uint64_t)>(
        dlsym(lib_, "fake_cupti_graph_launch"));
    subscribed_ = reinterpret_cast<int (*)()>(dlsym(lib_, "fake_cupti_subscribed"));
    ASSERT_NE(launch_, nullptr);
    ASSERT_NE(graph_launch_, nullptr);
  }
  void TearDown() override {
    ::unsetenv("HOURGLASS_CUPTI_LIBRARY");
    ::unsetenv("FAKE_CUPTI_FAIL_ENABLE");
    ::unsetenv("FAKE_CUPTI_FAIL_SUBSCRIBE");
    if (lib_ != nullptr) dlclose(lib_);
  }
  void kernel(const char* name, uint64_t ns, uint64_t gap_ns = 1000) {
    launch_(0, name, ns, gap_ns, 0);
  }
  using Launch = void (*)(int, const char*, uint64_t, uint64_t, uint64_t);
  void* lib_ = nullptr;
  Launch launch_ = nullptr;
  int (*enabled_)(int) = nullptr;
  void (*graph_node_)(uint64_t) = nullptr;
  void (*graph_clone_)(uint64_t, uint64_t) = nullptr;
  void (*graph_launch_)(const uint64_t*, int, uint64_t) = nullptr;
  int (*subscribed_)() = nullptr;
};

constexpr const char* kGemm = "_Z8sgemm_nnILi128EEvPKfS1_Pfi";  // void sgemm_nn<128>(...)

TEST_F(FakeCupti, KernelsAreAttributedToTheirOpsWithoutMarks) {
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  ASSERT_TRUE(profiler.uses_kernel_activity()) << profiler.timing_note();
  EXPECT_NE(profiler.timing_note().find("CUPTI 99"), std::string::npos) << profiler.timing_note();
  EXPECT_EQ(enabled_(10), 1);  // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  EXPECT_EQ(enabled_(39), 1);  // CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
  const int marks = profiler.clock().marks();
  profiler.install();
  for (int step = 0; step < 2; ++step) {
    {
      ops::OpScope conv("conv2d");
      kernel(kGemm, 300'000);  // 0.3 ms
      kernel("sm90_bias_relu", 50'000);
    }
    {
      ops::OpScope outer("composite");
      kernel("fill_kernel", 10'000);
      ops::OpScope inner("add");
      kernel("_Z10add_kernelPfPKfS1_i", 20'000);
    }
  }
  launch_(1, nullptr, 40'000, 1000, 4096);  // a copy outside any op
  profiler.uninstall();
  EXPECT_EQ(profiler.clock().marks(), marks);  // no marks around the ops
  const auto& events = profiler.events();
  ASSERT_EQ(events.size(), 6u);
  EXPECT_NEAR(profiler.device_ms(events[0]), 0.35, 1e-9);
  EXPECT_NEAR(profiler.device_ms(events[1]), 0.03, 1e-9);  // its own kernel and add's
  EXPECT_NEAR(profiler.device_ms(events[2]), 0.02, 1e-9);
  EXPECT_EQ(profiler.kernels().size(), 9u);

  const obs::OpProfileSummary s = obs::summarize(profiler, DevicePeaks{});
  EXPECT_TRUE(s.kernel_activity);
  EXPECT_NEAR(s.top_level_ms, 2 * (0.35 + 0.03), 1e-9);
  EXPECT_NEAR(s.outside_ops_ms, 0.04, 1e-9);
  std::vector<std::string> order;
  for (const obs::OpProfileRow& r : s.rows) order.push_back(r.name + "|" + r.parent);
  const std::vector<std::string> expected = {
      "conv2d|",        "sgemm_nn<128>|conv2d",  "sm90_bias_relu|conv2d",
      "composite|",     "fill_kernel|composite", "add|composite",
      "add_kernel|add", "(outside ops)|",        "memcpy HtoD|(outside ops)"};
  EXPECT_EQ(order, expected);
  const obs::OpProfileRow& gemm = s.rows[1];
  EXPECT_EQ(gemm.kind, obs::ProfileRowKind::Kernel);
  EXPECT_EQ(gemm.full_name, "void sgemm_nn<128>(float const*, float const*, float*, int)");
  EXPECT_EQ(gemm.calls, 2);
  EXPECT_NEAR(gemm.total_ms, 0.6, 1e-9);
  EXPECT_NEAR(gemm.min_ms, 0.3, 1e-9);
  EXPECT_NEAR(gemm.max_ms, 0.3, 1e-9);

  // The table: kernels indented under their op (four spaces; an inner op's six).
  const std::string table = obs::format_table(s, 0, 0);
  EXPECT_NE(table.find("\nconv2d "), std::string::npos) << table;
  EXPECT_NE(table.find("\n    sgemm_nn<128> "), std::string::npos) << table;
  EXPECT_NE(table.find("\n  add "), std::string::npos) << table;
  EXPECT_NE(table.find("\n      add_kernel "), std::string::npos) << table;
  EXPECT_NE(table.find("CUPTI"), std::string::npos) << table;
  EXPECT_LT(table.find("sgemm_nn"), table.find("sm90_bias_relu")) << table;  // by total

  const nlohmann::json j = nlohmann::json::parse(obs::profile_json(s, {}));
  EXPECT_TRUE(j["kernel_activity"].get<bool>());
  EXPECT_EQ(j["rows"][1]["kind"], "kernel");
  EXPECT_EQ(j["rows"][1]["parent"], "conv2d");

  // The trace: host, ops on the device and kernels as three rows; each kernel with its op.
  const nlohmann::json t = nlohmann::json::parse(obs::chrome_trace_json(profiler));
  std::set<int> rows;
  int kernels = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    rows.insert(e["tid"].get<int>());
    if (e["tid"] != 3) continue;
    ++kernels;
    EXPECT_GE(e["dur"].get<double>(), 0);
    if (e["name"] == "add_kernel") {
      EXPECT_EQ(e["args"]["op"], "add");
      EXPECT_NEAR(e["dur"].get<double>(), 20, 1e-9);
    }
  }
  EXPECT_EQ(kernels, 9);
  EXPECT_EQ(rows, (std::set<int>{1, 2, 3}));
}

TEST_F(FakeCupti, PhasesTotalTheirOpsBesideTheOutsideKernelsAndTheGaps) {
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  ASSERT_TRUE(profiler.uses_kernel_activity()) << profiler.timing_note();
  profiler.install();
  {
    ops::OpScope data("convert");  // before the step: no phase
    kernel("convert_kernel", 20'000);
  }
  ops::set_profile_phase("forward");
  {
    ops::OpScope conv("conv2d");
    kernel(kGemm, 300'000);
  }
  ops::set_profile_phase("backward");
  {
    ops::OpScope outer("conv2d_backward");
    ops::OpScope inner("add");  // an inner op counts in its parent, in the parent's phase
    kernel("_Z10add_kernelPfPKfS1_i", 500'000);
  }
  launch_(1, nullptr, 40'000, 1000, 4096);  // a copy outside any op
  ops::set_profile_phase("update");
  {
    ops::OpScope sgd("sgd_step");
    kernel("sgd_kernel", 100'000);
  }
  ops::set_profile_phase("");
  profiler.uninstall();
  const auto& events = profiler.events();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_STREQ(events[0].phase, "");
  EXPECT_STREQ(events[1].phase, "forward");
  EXPECT_STREQ(events[3].phase, "backward");
  const obs::OpProfileSummary s = obs::summarize(profiler, DevicePeaks{});
  std::vector<std::string> names;
  for (const obs::PhaseTotal& p : s.phases) names.push_back(p.phase);
  EXPECT_EQ(names, (std::vector<std::string>{"(no phase)", "forward", "backward", "update"}));
  ASSERT_EQ(s.phases.size(), 4u);
  EXPECT_NEAR(s.phases[0].ms, 0.02, 1e-9);
  EXPECT_NEAR(s.phases[1].ms, 0.3, 1e-9);
  EXPECT_NEAR(s.phases[2].ms, 0.5, 1e-9);
  EXPECT_EQ(s.phases[2].calls, 1) << "one top-level op; its inner op is not counted again";
  EXPECT_NEAR(s.phases[3].ms, 0.1, 1e-9);
  EXPECT_NEAR(s.outside_ops_ms, 0.04, 1e-9);

  // One measured step of 1.2 ms: 0.96 ms of kernels, 0.24 ms of gaps.
  const std::string table = obs::format_table(s, 1.2, 1);
  EXPECT_NE(table.find("\nbackward "), std::string::npos) << table;
  EXPECT_NE(table.find("41.7%"), std::string::npos) << table;  // backward: 0.5 of 1.2 ms
  EXPECT_NE(table.find("\ngaps "), std::string::npos) << table;
  EXPECT_NE(table.find("0.240"), std::string::npos) << table;
  obs::OpProfileSource source;
  source.steps = 1;
  source.step_ms = 1.2;
  const nlohmann::json j = nlohmann::json::parse(obs::profile_json(s, source));
  std::map<std::string, double> per_step;
  for (const auto& p : j["phases"]) per_step[p["phase"]] = p["ms_per_step"].get<double>();
  EXPECT_NEAR(per_step["forward"], 0.3, 1e-9);
  EXPECT_NEAR(per_step["(outside ops)"], 0.04, 1e-9);
  EXPECT_NEAR(per_step["gaps"], 0.24, 1e-9);

  // The trace names each op's and each kernel's phase.
  const nlohmann::json t = nlohmann::json::parse(obs::chrome_trace_json(profiler));
  int tagged = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != 3 || e["name"] != "add_kernel") continue;
    EXPECT_EQ(e["args"]["phase"], "backward");
    ++tagged;
  }
  EXPECT_EQ(tagged, 1);
}

TEST_F(FakeCupti, RealOpsLaunchNothingHereAndCostNoMarks) {
  // CPU ops under kernel activity: recorded with their costs, no kernels, zero device time.
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  ASSERT_TRUE(profiler.uses_kernel_activity());
  const Tensor a = Tensor::full({8, 8}, 1.0);
  profiler.install();
  (void)ops::add(a, a);
  profiler.uninstall();
  ASSERT_EQ(profiler.events().size(), 1u);
  EXPECT_EQ(profiler.device_ms(profiler.events()[0]), 0);
  EXPECT_TRUE(profiler.kernels().empty());
}

TEST_F(FakeCupti, FallsBackToMarksWhenEnablingFails) {
  ::setenv("FAKE_CUPTI_FAIL_ENABLE", "1", 1);
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  EXPECT_FALSE(profiler.uses_kernel_activity());
  EXPECT_NE(profiler.timing_note().find("cuptiActivityEnable"), std::string::npos)
      << profiler.timing_note();
  const int marks = profiler.clock().marks();
  profiler.install();
  (void)ops::relu(Tensor::full({4}, 1.0));
  profiler.uninstall();
  EXPECT_EQ(profiler.clock().marks(), marks + 2);  // the marks around the op
}

TEST_F(FakeCupti, FallsBackToMarksWithoutTheLibrary) {
  ::setenv("HOURGLASS_CUPTI_LIBRARY", "/nonexistent/libcupti.so", 1);
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  EXPECT_FALSE(profiler.uses_kernel_activity());
  EXPECT_NE(profiler.timing_note().find("could not be opened"), std::string::npos)
      << profiler.timing_note();
  profiler.install();
  (void)ops::relu(Tensor::full({4}, 1.0));
  profiler.uninstall();
  const obs::OpProfileSummary s = obs::summarize(profiler);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_FALSE(s.kernel_activity);
}

// A "step" captured as a graph: conv2d (two nodes), composite (one node, and add's one) and a
// node made outside any op; the template it records, as the step graph records it.
uint64_t capture_step(void (*node)(uint64_t)) {
  ops::GraphCaptureScope capture;
  {
    ops::OpScope conv("conv2d");
    node(101);
    node(102);
  }
  {
    ops::OpScope outer("composite");
    node(103);
    ops::OpScope inner("add");
    node(104);
  }
  node(105);
  return capture.template_id();
}

TEST_F(FakeCupti, GraphReplaysAttributeEachReplaysKernelsToItsCopiesOfTheOps) {
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  ASSERT_TRUE(profiler.profiles_graphs()) << profiler.graph_note();
  EXPECT_EQ(subscribed_(), 1);
  EXPECT_NE(profiler.timing_note().find("graph replays included"), std::string::npos)
      << profiler.timing_note();
  profiler.install();
  {
    ops::OpScope eager("conv2d");  // an eager call before the graph
    kernel(kGemm, 5'000);
  }
  const uint64_t id = capture_step(graph_node_);
  ASSERT_NE(id, 0u);
  EXPECT_TRUE(profiler.has_template(id));
  EXPECT_EQ(profiler.events().size(), 1u) << "the capture's ops ran nothing: not calls";
  for (uint64_t n = 101; n <= 105; ++n) graph_clone_(n, n + 100);  // instantiation
  const uint64_t clones[] = {201, 202, 203, 204, 205};
  const uint64_t originals[] = {101, 102, 103, 104, 105};
  {
    ops::GraphReplayScope replay(id);  // replayed kernels naming the clones
    graph_launch_(clones, 5, 10'000);
  }
  {
    ops::GraphReplayScope replay(id);  // ... or the originals: both are mapped
    graph_launch_(originals, 5, 20'000);
  }
  profiler.uninstall();
  EXPECT_EQ(profiler.replays(), 2);
  const auto& events = profiler.events();
  ASSERT_EQ(events.size(), 7u);  // the eager call, then 3 per replay
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(r == 0 ? "replay 1" : "replay 2");
    const size_t base = 1 + 3 * r;
    const double kernel_ms = r == 0 ? 0.01 : 0.02;
    EXPECT_STREQ(events[base].name, "conv2d");
    EXPECT_STREQ(events[base + 1].name, "composite");
    EXPECT_STREQ(events[base + 2].name, "add");
    EXPECT_EQ(events[base + 2].parent_index, int(base + 1));
    EXPECT_STREQ(events[base + 2].parent, "composite");
    EXPECT_EQ(events[base + 2].depth, 1);
    EXPECT_NEAR(profiler.device_ms(events[base]), 2 * kernel_ms, 1e-9);
    EXPECT_NEAR(profiler.device_ms(events[base + 1]), 2 * kernel_ms, 1e-9);  // add's counted
    EXPECT_NEAR(profiler.device_ms(events[base + 2]), kernel_ms, 1e-9);
    EXPECT_LE(events[base].host_start_us, events[base].host_end_us);
  }
  EXPECT_LT(profiler.device_end_ms(events[1]), profiler.device_start_ms(events[4]));
  EXPECT_EQ(profiler.kernels().size(), 11u);

  const obs::OpProfileSummary s = obs::summarize(profiler, DevicePeaks{});
  std::map<std::string, int64_t> calls;
  for (const obs::OpProfileRow& r : s.rows)
    if (r.kind == obs::ProfileRowKind::Op) calls[r.name + "|" + r.parent] = r.calls;
  const std::map<std::string, int64_t> expected = {
      {"conv2d|", 3}, {"composite|", 2}, {"add|composite", 2}, {"(outside ops)|", 2}};
  EXPECT_EQ(calls, expected);
  EXPECT_NEAR(s.outside_ops_ms, 0.01 + 0.02, 1e-9);  // node 105's kernel of each replay
  EXPECT_NEAR(s.top_level_ms, 0.005 + 4 * 0.01 + 4 * 0.02, 1e-9);
}

TEST_F(FakeCupti, AGraphCapturedWithoutTheProfilerReplaysOutsideItsOps) {
  uint64_t id = 0;
  {
    ops::OpProfiler earlier(Device::cpu(), ops::DeviceTiming::KernelActivity);
    earlier.install();
    id = capture_step(graph_node_);
  }
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  EXPECT_FALSE(profiler.has_template(id)) << "the step graph must capture again";
  profiler.install();
  const uint64_t nodes[] = {101, 102, 103, 104, 105};
  {
    ops::GraphReplayScope replay(id);
    graph_launch_(nodes, 5, 10'000);
  }
  profiler.uninstall();
  EXPECT_TRUE(profiler.events().empty());
  ASSERT_EQ(profiler.kernels().size(), 5u);
  for (const KernelRecord& k : profiler.kernels()) EXPECT_EQ(k.op_id, 0u);
}

TEST_F(FakeCupti, WithoutTheSubscriberGraphsAreNotProfiled) {
  ::setenv("FAKE_CUPTI_FAIL_SUBSCRIBE", "1", 1);
  ops::OpProfiler profiler(Device::cpu(), ops::DeviceTiming::KernelActivity);
  ASSERT_TRUE(profiler.uses_kernel_activity()) << profiler.timing_note();
  EXPECT_FALSE(profiler.profiles_graphs());
  EXPECT_NE(profiler.graph_note().find("cuptiSubscribe failed"), std::string::npos)
      << profiler.graph_note();
  EXPECT_NE(profiler.timing_note().find("run eagerly"), std::string::npos)
      << profiler.timing_note();
  profiler.install();
  const uint64_t id = capture_step(graph_node_);
  profiler.uninstall();
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(profiler.events().size(), 3u);  // recorded as calls, as eager steps record them
}

TEST_F(FakeCupti, TheSubscriberLivesWithTheCollectors) {
  {
    ops::OpProfiler a(Device::cpu(), ops::DeviceTiming::KernelActivity);
    ops::OpProfiler b(Device::cpu(), ops::DeviceTiming::KernelActivity);
    EXPECT_TRUE(a.profiles_graphs() && b.profiles_graphs()) << a.graph_note();
    EXPECT_EQ(subscribed_(), 1);
  }
  EXPECT_EQ(subscribed_(), 0);
}

#endif  // HG_FAKE_CUPTI

TEST(OpProfiler, TheCpuUsesMarksUnlessAsked) {
  ops::OpProfiler profiler(Device::cpu());
  EXPECT_FALSE(profiler.uses_kernel_activity());
  EXPECT_EQ(profiler.timing_note(), "host clock");
  std::string why;
#if !defined(HOURGLASS_HAS_GPU) || defined(HOURGLASS_GPU_HIP)
  EXPECT_EQ(start_kernel_activity(why), nullptr);
  EXPECT_FALSE(why.empty());
#endif
}

}  // namespace
}  // namespace hg
