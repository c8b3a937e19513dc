// The tuning cache on the GPU (cuDNN builds; skips without a GPU and on HIP, whose MIOpen keeps
// its own find-db): a convolution searched with a fresh cache folder, then, with the
// in-process plans and the cache's memory dropped (as in a new process, only the file left),
// planned again from the file with no search and no timing and the same engines chosen, in the
// timed (f32 without TF32, where NCHW engines compete too; bf16) and the deterministic mode. A
// cached entry that names an engine cuDNN does not have, or that does not parse, is ignored
// with a warning and searched again, and the result is still right. The same for cuBLASLt's
// matrix products: searched (the heuristic's algorithms timed) once, then taken from the file
// with the same algorithm and the same bits; entries cuBLASLt refuses or that do not parse are
// searched again.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "hourglass/base/atomic_file.h"
#include "hourglass/ops/math_settings.h"
#include "hourglass/ops/ops.h"
#include "hourglass/ops/tuning_cache.h"
#include "support/compare.h"
#include "support/gpu.h"
#include "support/log_capture.h"
#include "support/temp_dir.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/dnn.h"
#endif

namespace hg {
namespace {

#if defined(HOURGLASS_HAS_GPU) && !defined(HOURGLASS_GPU_HIP)

using gpu::MathMode;
using gpu::dnn::ConvGeometry;

using test::LogCapture;

// The three passes of one convolution on the GPU, each output copied back to the host.
struct PassOutputs {
  std::vector<double> y, dx, dw;
};

PassOutputs run_passes(int64_t n, DType dtype, MathMode math) {
  const Conv2dParams prm{1, 1, 1, 1, 1, 1, 1};
  const Device dev = Device::gpu(0);
  const Tensor x =
      test::f32_tensor(test::random_values(n * 9 * 9 * 6, 1), {n, 9, 9, 6}).to(dtype).to(dev);
  const Tensor w =
      test::f32_tensor(test::random_values(10 * 3 * 3 * 6, 2), {10, 3, 3, 6}).to(dtype).to(dev);
  const ConvGeometry g = ConvGeometry::of(x, w, prm);
  const Tensor dy = test::f32_tensor(test::random_values(n * g.p * g.q * 10, 3), {n, g.p, g.q, 10})
                        .to(dtype)
                        .to(dev);
  Tensor y = Tensor::empty({n, g.p, g.q, 10}, dtype, dev);
  Tensor dx = Tensor::empty(x.shape(), dtype, dev);
  Tensor dw = Tensor::empty(w.shape(), dtype, dev);
  gpu::dnn::conv_forward(g, math, x, w, y);
  gpu::dnn::conv_backward_data(g, math, dy, w, dx);
  gpu::dnn::conv_backward_filter(g, math, dy, x, dw);
  return PassOutputs{test::to_doubles(y), test::to_doubles(dx), test::to_doubles(dw)};
}

// The entries planned so far whose key holds `n` as its convolution's batch.
std::map<std::string, std::string> choices_of(int64_t n) {
  std::map<std::string, std::string> out;
  const std::string needle = fmt::format(" {},9,9,6 ", n);
  for (const auto& [key, choice] : gpu::dnn::planned_choices(0))
    if (key.find(needle) != std::string::npos) out[key] = choice;
  return out;
}

class GpuTuningCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::gpu_available()) GTEST_SKIP() << test::gpu_unavailable_reason();
    // A folder per test: CTest runs the tests of this file as processes side by side.
    dir_ = test::fresh_temp_dir(std::string("gpu_tuning_cache_") +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ops::configure_tuning_cache(ops::TuningCacheMode::ReadWrite, dir_);
    ops::tuning_cache_forget();  // the counts start at zero
  }
  void TearDown() override {
    ops::set_deterministic(false);
    ops::configure_tuning_cache(ops::TuningCacheMode::Off, "");
  }
  // As a new process: no plans, no entries in memory; only the cache's file.
  static void new_process() {
    gpu::dnn::forget_plans_for_testing();
    gpu::blas::forget_plans_for_testing();
    ops::tuning_cache_forget();
  }
  // Searches (cold), then plans again from the cache (warm): no search, no timing, the same
  // choices, the same outputs.
  void check_warm_run_searches_nothing(int64_t n, DType dtype, MathMode math) {
    const gpu::dnn::SearchCounts c0 = gpu::dnn::search_counts();
    const PassOutputs cold = run_passes(n, dtype, math);
    const gpu::dnn::SearchCounts c1 = gpu::dnn::search_counts();
    EXPECT_EQ(c1.searched - c0.searched, 3);
    EXPECT_EQ(c1.from_cache, c0.from_cache);
    const std::map<std::string, std::string> chosen = choices_of(n);
    ASSERT_EQ(chosen.size(), 3u);
    EXPECT_EQ(ops::tuning_cache_counts().stored, 3);

    new_process();
    const PassOutputs warm = run_passes(n, dtype, math);
    const gpu::dnn::SearchCounts c2 = gpu::dnn::search_counts();
    EXPECT_EQ(c2.searched, c1.searched) << "a warm cache searched";
    EXPECT_EQ(c2.timed, c1.timed) << "a warm cache timed candidates";
    EXPECT_EQ(c2.from_cache - c1.from_cache, 3);
    EXPECT_EQ(choices_of(n), chosen);
    EXPECT_EQ(ops::tuning_cache_counts().hits, 3);
    EXPECT_EQ(ops::tuning_cache_counts().rejected, 0);
    // The same engines on the same inputs: the same bits where they are deterministic (an
    // engine of the timed mode may sum with atomics), else the same values within f32's bound.
    if (ops::deterministic()) {
      EXPECT_EQ(warm.y, cold.y);
      EXPECT_EQ(warm.dx, cold.dx);
      EXPECT_EQ(warm.dw, cold.dw);
    } else {
      expect_near(warm.y, cold.y, dtype);
      expect_near(warm.dx, cold.dx, dtype);
      expect_near(warm.dw, cold.dw, dtype);
    }
  }
  // Replaces the entries of the cache's file (the one file in dir_) with `entries`, under its
  // own header; returns its path, or "" when there is no file.
  std::string rewrite_cache_file(const std::map<std::string, std::string>& entries) const {
    std::string file;
    for (const auto& entry : std::filesystem::directory_iterator(dir_))
      if (entry.path().extension() == ".txt") file = entry.path().string();
    if (file.empty()) return file;
    const std::string text = read_file_bytes(file);
    const std::string header = text.substr(0, text.find('\n', text.find('\n') + 1) + 1);
    const std::string identity = header.substr(header.find("# identity: ") + 12,
                                               header.size() - header.find("# identity: ") - 13);
    write_file_atomic(file, ops::encode_tuning_file(identity, entries));
    return file;
  }
  static void expect_near(const std::vector<double>& got, const std::vector<double>& ref,
                          DType dtype) {
    ASSERT_EQ(got.size(), ref.size());
    double scale = 1;
    for (const double v : ref) scale = std::max(scale, std::abs(v));
    const double bound = (dtype == DType::F32 ? 1e-4 : 1e-2) * scale;
    for (size_t j = 0; j < got.size(); ++j) ASSERT_NEAR(got[j], ref[j], bound) << "element " << j;
  }
  std::string dir_;
};

TEST_F(GpuTuningCache, WarmCacheTimesNothingF32Exact) {
  check_warm_run_searches_nothing(3, DType::F32, MathMode::Exact);
  EXPECT_GT(gpu::dnn::search_counts().timed, 0);  // the cold search did time candidates
}

TEST_F(GpuTuningCache, WarmCacheTimesNothingBf16) {
  check_warm_run_searches_nothing(4, DType::BF16, MathMode::Exact);
}

// A ResNet layer's convolution in bf16 (64 channels, 16x16): cuDNN's engines for it come with
// knob choices (tile sizes, split-K, stages), which a choice must keep, or the engine rebuilt
// from the cache runs its default knobs (on the H200, steps three times slower). Each pass's
// stored choice is its searched configuration whole: engine and knobs.
TEST_F(GpuTuningCache, ChoicesKeepTheConfigurationsKnobs) {
  const Conv2dParams prm{1, 1, 1, 1, 1, 1, 1};
  const Device dev = Device::gpu(0);
  const Tensor x = test::f32_tensor(test::random_values(8 * 16 * 16 * 64, 4), {8, 16, 16, 64})
                       .to(DType::BF16)
                       .to(dev);
  const Tensor w = test::f32_tensor(test::random_values(64 * 3 * 3 * 64, 5), {64, 3, 3, 64})
                       .to(DType::BF16)
                       .to(dev);
  const ConvGeometry g = ConvGeometry::of(x, w, prm);
  Tensor y = Tensor::empty({8, g.p, g.q, 64}, DType::BF16, dev);
  gpu::dnn::conv_forward(g, MathMode::Exact, x, w, y);
  int with_knobs = 0, forward = 0;
  for (const auto& [key, choice] : gpu::dnn::planned_choices(0)) {
    if (key.find(" 8,16,16,64 ") == std::string::npos) continue;
    ++forward;
    // "layout:engine:knob=value,...": something after the second ':'.
    const size_t second = choice.find(':', choice.find(':') + 1);
    ASSERT_NE(second, std::string::npos) << choice;
    if (second + 1 < choice.size()) ++with_knobs;
  }
  EXPECT_EQ(forward, 1);
  EXPECT_EQ(with_knobs, 1) << "the searched forward engine's knobs were not read";
}

TEST_F(GpuTuningCache, WarmCacheTimesNothingDeterministicWithTheSameChoice) {
  ops::set_deterministic(true);
  const int64_t timed_before = gpu::dnn::search_counts().timed;
  check_warm_run_searches_nothing(5, DType::F32, MathMode::Tf32);
  EXPECT_EQ(gpu::dnn::search_counts().timed, timed_before);  // deterministic: nothing timed
}

TEST_F(GpuTuningCache, StaleOrMalformedEntriesAreSearchedAgain) {
  const PassOutputs reference = run_passes(6, DType::F32, MathMode::Exact);
  const std::map<std::string, std::string> chosen = choices_of(6);
  ASSERT_EQ(chosen.size(), 3u);
  // Rewrite the file's three entries: engines cuDNN does not have (in either layout, one with a
  // knob) and a choice that does not parse.
  std::map<std::string, std::string> bad;
  const char* replacements[] = {"nhwc:99999:", "not-a-choice", "nchw:88888:1=2"};
  size_t i = 0;
  for (const auto& [key, choice] : chosen) bad[key] = replacements[i++];
  const std::string file = rewrite_cache_file(bad);
  ASSERT_FALSE(file.empty());

  new_process();
  LogCapture log;
  const int64_t searched = gpu::dnn::search_counts().searched;
  const PassOutputs again = run_passes(6, DType::F32, MathMode::Exact);
  EXPECT_EQ(gpu::dnn::search_counts().searched - searched, 3) << log.text();
  EXPECT_EQ(ops::tuning_cache_counts().rejected, 3) << log.text();
  EXPECT_NE(log.text().find(file), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("nhwc:99999:"), std::string::npos) << log.text();
  // Searched again, so possibly another engine: equal within f32's bound, not bitwise.
  expect_near(again.y, reference.y, DType::F32);
  expect_near(again.dx, reference.dx, DType::F32);
  expect_near(again.dw, reference.dw, DType::F32);
  // And the file holds the searches' choices again.
  new_process();
  (void)run_passes(6, DType::F32, MathMode::Exact);
  EXPECT_EQ(ops::tuning_cache_counts().hits, 3);
  EXPECT_EQ(ops::tuning_cache_counts().rejected, 0);
}

TEST_F(GpuTuningCache, OffSearchesEveryTime) {
  ops::configure_tuning_cache(ops::TuningCacheMode::Off, dir_);
  const int64_t searched = gpu::dnn::search_counts().searched;
  (void)run_passes(7, DType::BF16, MathMode::Exact);
  new_process();
  (void)run_passes(7, DType::BF16, MathMode::Exact);
  EXPECT_EQ(gpu::dnn::search_counts().searched - searched, 6);
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

// One product D[m x n] = A[m x k] B[k x n] + bias (column-major, f32 without TF32) on the GPU,
// D copied back to the host.
std::vector<double> run_matmul(int64_t m, int64_t n, int64_t k) {
  const Device dev = Device::gpu(0);
  const Tensor a = test::f32_tensor(test::random_values(m * k, 11), {k, m}).to(dev);
  const Tensor b = test::f32_tensor(test::random_values(k * n, 12), {n, k}).to(dev);
  const Tensor bias = test::f32_tensor(test::random_values(m, 13), {m}).to(dev);
  Tensor d = Tensor::empty({n, m}, DType::F32, dev);
  gpu::blas::matmul(MathMode::Exact, m, n, k, a, gpu::blas::Transpose::No, m, b,
                    gpu::blas::Transpose::No, k, bias, d, m);
  return test::to_doubles(d);
}

// The same product in double on the host.
std::vector<double> matmul_reference(int64_t m, int64_t n, int64_t k) {
  const std::vector<double> a =
      test::to_doubles(test::f32_tensor(test::random_values(m * k, 11), {k, m}));
  const std::vector<double> b =
      test::to_doubles(test::f32_tensor(test::random_values(k * n, 12), {n, k}));
  const std::vector<double> bias =
      test::to_doubles(test::f32_tensor(test::random_values(m, 13), {m}));
  std::vector<double> d(size_t(m * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double sum = bias[size_t(i)];
      for (int64_t p = 0; p < k; ++p) sum += a[size_t(p * m + i)] * b[size_t(j * k + p)];
      d[size_t(j * m + i)] = sum;
    }
  return d;
}

// The products planned so far whose key holds "MxNxK".
std::map<std::string, std::string> matmul_choices_of(int64_t m, int64_t n, int64_t k) {
  std::map<std::string, std::string> out;
  const std::string needle = fmt::format(" {}x{}x{} ", m, n, k);
  for (const auto& [key, choice] : gpu::blas::planned_choices(0))
    if (key.find(needle) != std::string::npos) out[key] = choice;
  return out;
}

TEST_F(GpuTuningCache, MatmulWarmCacheTimesNothingWithTheSameAlgorithm) {
  const int64_t m = 300, n = 257, k = 520;
  const gpu::blas::SearchCounts c0 = gpu::blas::search_counts();
  const std::vector<double> cold = run_matmul(m, n, k);
  const gpu::blas::SearchCounts c1 = gpu::blas::search_counts();
  EXPECT_EQ(c1.searched - c0.searched, 1);
  EXPECT_GT(c1.timed - c0.timed, 1) << "the heuristic listed one algorithm only: nothing compared";
  const std::map<std::string, std::string> chosen = matmul_choices_of(m, n, k);
  ASSERT_EQ(chosen.size(), 1u);
  EXPECT_EQ(chosen.begin()->second.size(), 128u) << chosen.begin()->second;
  EXPECT_EQ(ops::tuning_cache_counts().stored, 1);
  expect_near(cold, matmul_reference(m, n, k), DType::F32);

  new_process();
  const std::vector<double> warm = run_matmul(m, n, k);
  const gpu::blas::SearchCounts c2 = gpu::blas::search_counts();
  EXPECT_EQ(c2.searched, c1.searched) << "a warm cache searched";
  EXPECT_EQ(c2.timed, c1.timed) << "a warm cache timed algorithms";
  EXPECT_EQ(c2.from_cache - c1.from_cache, 1);
  EXPECT_EQ(matmul_choices_of(m, n, k), chosen);
  EXPECT_EQ(ops::tuning_cache_counts().hits, 1);
  EXPECT_EQ(warm, cold);  // the same algorithm on the same operands: the same bits
}

TEST_F(GpuTuningCache, MatmulDeterministicModeTimesNothing) {
  ops::set_deterministic(true);
  const int64_t m = 301, n = 129, k = 64;
  const gpu::blas::SearchCounts c0 = gpu::blas::search_counts();
  const std::vector<double> first = run_matmul(m, n, k);
  const gpu::blas::SearchCounts c1 = gpu::blas::search_counts();
  EXPECT_EQ(c1.searched - c0.searched, 1);
  EXPECT_EQ(c1.timed, c0.timed);
  new_process();
  EXPECT_EQ(run_matmul(m, n, k), first);
  EXPECT_EQ(gpu::blas::search_counts().from_cache - c1.from_cache, 1);
}

TEST_F(GpuTuningCache, MatmulStaleOrMalformedEntriesAreSearchedAgain) {
  const struct { int64_t m, n, k; } shapes[] = {{96, 33, 40}, {97, 33, 40}, {98, 33, 40}};
  for (const auto& sh : shapes) (void)run_matmul(sh.m, sh.n, sh.k);
  std::map<std::string, std::string> chosen;
  for (const auto& sh : shapes) chosen.merge(matmul_choices_of(sh.m, sh.n, sh.k));
  ASSERT_EQ(chosen.size(), 3u);
  // An algorithm cuBLASLt does not accept (every byte 0xff), one that is not hex, one too short.
  std::map<std::string, std::string> bad;
  const std::string replacements[] = {std::string(128, 'f'), std::string(128, 'z'), "0123abcd"};
  size_t i = 0;
  for (const auto& [key, choice] : chosen) bad[key] = replacements[i++];
  const std::string file = rewrite_cache_file(bad);
  ASSERT_FALSE(file.empty());

  new_process();
  LogCapture log;
  const int64_t searched = gpu::blas::search_counts().searched;
  for (const auto& sh : shapes)
    expect_near(run_matmul(sh.m, sh.n, sh.k), matmul_reference(sh.m, sh.n, sh.k), DType::F32);
  EXPECT_EQ(gpu::blas::search_counts().searched - searched, 3) << log.text();
  EXPECT_EQ(ops::tuning_cache_counts().rejected, 3) << log.text();
  EXPECT_NE(log.text().find(file), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("does not accept it"), std::string::npos) << log.text();
  // The file holds the searches' choices again.
  new_process();
  for (const auto& sh : shapes) (void)run_matmul(sh.m, sh.n, sh.k);
  EXPECT_EQ(ops::tuning_cache_counts().hits, 3);
  EXPECT_EQ(ops::tuning_cache_counts().rejected, 0);
}

#else

TEST(GpuTuningCache, NeedsCudnn) {
  GTEST_SKIP() << "the tuning cache's GPU test needs a CUDA build (cuDNN) and a GPU";
}

#endif

}  // namespace
}  // namespace hg
