// GPU batch normalisation (training forward with running statistics, eval forward, backward)
// against the CPU backend (itself checked against float64 references in test_batch_norm.cpp),
// in f32, bf16 and f16, on the shapes of a ResNet-18 CIFAR step at batch 512, awkward small
// shapes ([N,C] inputs, 1, 2, 3, 5 and 17 channels, 2048 channels), inputs far from zero, and
// misaligned inputs; plus determinism.
//
// Inputs are rounded to the GPU dtype on the CPU first, so both backends see the same values
// and the CPU computes from them in f32 with float64 statistics. Bounds are relative to the
// largest |reference| of each output:
//  - f32 results, including every statistic and parameter gradient in every dtype, 1e-5: both
//    sides compute the statistics to a few f32 ulps of their own size (the GPU by float
//    Welford/Chan merges over a shifted input, the CPU in double), and each output is a few
//    rounded operations on them: a few 1e-7 of the output scale. A wrong channel, a missed
//    row or a biased variance is off by far more.
//  - bf16/f16 y and dx, 1e-2: one rounding of each output (2^-9 for bf16, 2^-11 for f16) after
//    f32 arithmetic; plus half that on the mean signed error (bias).
// Allocator poisoning is on in every test: fresh GPU blocks are filled with NaN bytes, so an
// output element the kernels leave unwritten (or a partial the last block misses) fails the
// comparison, which rejects non-finite values.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "support/gpu.h"

namespace hg {
namespace {

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

// ---- modes and tolerances

const DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};

double bound_of(DType dtype) { return dtype == DType::F32 ? 1e-5 : 1e-2; }

using test::PoisonGuard;

// got (a GPU tensor of dtype `dtype`) against the CPU f32 reference, within `bound` times the
// largest |reference| plus `extra`.
void expect_close(const Tensor& got, const Tensor& ref, DType dtype, double bound,
                  const std::string& what, double extra = 0.0) {
  ASSERT_TRUE(got.defined()) << what << " is undefined";
  EXPECT_TRUE(got.device().is_gpu()) << what << " is on " << got.device().str();
  EXPECT_EQ(got.dtype(), dtype) << what;
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const std::vector<double> r = test::to_doubles(ref);
  double scale = 0;
  for (const double v : r) scale = std::max(scale, std::abs(v));
  if (scale == 0) scale = 1;
  const double atol = bound * scale + extra;
  const bool low_precision = dtype == DType::BF16 || dtype == DType::F16;
  const test::Tolerance tol{0.0, atol, low_precision ? 0.5 * atol : -1.0};
  EXPECT_TRUE(test::all_close(got, r, tol)) << what << " (" << dtype_name(dtype) << ")";
}

// An output of x's dtype (y, dx) and an f32 one (statistics, parameter gradients).
void expect_data(const Tensor& got, const Tensor& ref, DType dtype, const std::string& what,
                 double extra = 0.0) {
  expect_close(got, ref, dtype, bound_of(dtype), what, extra);
}
void expect_f32(const Tensor& got, const Tensor& ref, const std::string& what) {
  expect_close(got, ref, DType::F32, 1e-5, what);
}

// Both backends round the batch mean to f32 before normalising, and the two roundings may
// differ by an ulp (|mean| 2^-23 at most), which moves y by weight * invstd times that: far
// below the bound for data near zero, but for mean 100 and spread 0.1 it is ~1e-4 of y's scale.
double mean_rounding(const Tensor& weight, const Tensor& mean, const Tensor& invstd) {
  const std::vector<double> w = test::to_doubles(weight), m = test::to_doubles(mean),
                            is = test::to_doubles(invstd);
  double worst = 0;
  for (size_t c = 0; c < w.size(); ++c)
    worst = std::max(worst, std::abs(w[c]) * is[c] * std::abs(m[c]) * std::ldexp(1.0, -23));
  return worst;
}

// dx = weight * invstd * (dy - dbias / M - xhat * dweight / M) is a difference of terms of
// size |weight * invstd * dy|; when they cancel (with two rows dx is exactly 0) what is left
// is their rounding, so dx is also allowed the f32 bound times that size.
double dx_terms(const Tensor& weight, const Tensor& invstd, const Tensor& dy) {
  const std::vector<double> w = test::to_doubles(weight), is = test::to_doubles(invstd),
                            g = test::to_doubles(dy);
  double coefficient = 0, grad = 0;
  for (size_t c = 0; c < w.size(); ++c) coefficient = std::max(coefficient, std::abs(w[c] * is[c]));
  for (const double v : g) grad = std::max(grad, std::abs(v));
  return bound_of(DType::F32) * coefficient * grad;
}

// ---- data

struct BnCase {
  const char* name;
  Shape shape;          // [N,H,W,C] or [N,C]
  double center = 0.5;  // x uniform in center +- half_width
  double half_width = 2.0;
};

// A CPU f32 tensor of uniform values in [lo, hi), rounded to `dtype`: the exact values the GPU
// will get.
Tensor cpu_values(const Shape& shape, uint64_t seed, DType dtype, double lo, double hi) {
  Tensor t = test::f32_tensor(test::random_values(shape_numel(shape), seed, lo, hi), shape);
  return dtype == DType::F32 ? t : t.to(dtype).to(DType::F32);
}

struct BnData {
  Tensor x, dy;                                    // CPU f32, rounded to the dtype
  Tensor weight, bias, running_mean, running_var;  // CPU f32 [C]
};

BnData make_data(const BnCase& cs, DType dtype, uint64_t seed) {
  const int64_t c = cs.shape.back();
  double half = cs.half_width;
  // bf16 spaces values 0.5 apart near 100: a spread of 0.1 would round to one value there.
  if (dtype == DType::BF16 && cs.center > 10 * half) half = std::max(half, cs.center / 32);
  BnData d;
  d.x = cpu_values(cs.shape, seed, dtype, cs.center - half, cs.center + half);
  d.dy = cpu_values(cs.shape, seed + 1, dtype, -1.0, 1.0);
  d.weight = cpu_values({c}, seed + 2, DType::F32, 0.5, 1.5);
  d.bias = cpu_values({c}, seed + 3, DType::F32, -0.5, 0.5);
  d.running_mean = cpu_values({c}, seed + 4, DType::F32, -0.2, 0.2);
  d.running_var = cpu_values({c}, seed + 5, DType::F32, 0.5, 2.0);
  return d;
}

Tensor gpu(const Tensor& cpu, DType dtype = DType::F32) { return cpu.to(dtype).to(Device::gpu(0)); }

// ---- the comparison, per shape and dtype

// Training forward, eval forward and backward (from the CPU's saved statistics, so backward
// is checked on its own) against the CPU backend.
void check_against_cpu(const BnCase& cs, DType dtype, uint64_t seed) {
  const BnData d = make_data(cs, dtype, seed);
  const Tensor w = gpu(d.weight), b = gpu(d.bias);

  Tensor rm_cpu = d.running_mean.clone(), rv_cpu = d.running_var.clone();
  const ops::BatchNormForward ref =
      ops::batch_norm_train(d.x, d.weight, d.bias, rm_cpu, rv_cpu, kMomentum, kEps);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const Tensor x = gpu(d.x, dtype);
  const ops::BatchNormForward out = ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps);
  expect_data(out.y, ref.y, dtype, "train y", mean_rounding(d.weight, ref.mean, ref.invstd));
  expect_f32(out.mean, ref.mean, "train mean");
  expect_f32(out.invstd, ref.invstd, "train invstd");
  expect_f32(rm, rm_cpu, "running_mean");
  expect_f32(rv, rv_cpu, "running_var");

  const Tensor y_eval_ref =
      ops::batch_norm_eval(d.x, d.weight, d.bias, d.running_mean, d.running_var, kEps);
  const Tensor y_eval =
      ops::batch_norm_eval(x, w, b, gpu(d.running_mean), gpu(d.running_var), kEps);
  expect_data(y_eval, y_eval_ref, dtype, "eval y");

  const ops::BatchNormGrads gref =
      ops::batch_norm_backward(d.dy, d.x, d.weight, ref.mean, ref.invstd);
  const ops::BatchNormGrads g =
      ops::batch_norm_backward(gpu(d.dy, dtype), x, w, gpu(ref.mean), gpu(ref.invstd));
  expect_data(g.dx, gref.dx, dtype, "dx", dx_terms(d.weight, ref.invstd, d.dy));
  expect_f32(g.dweight, gref.dweight, "dweight");
  expect_f32(g.dbias, gref.dbias, "dbias");
}

// ResNet-18 on CIFAR at batch 512: rows x channels of every batch norm; then small and
// awkward ones: [N,C] inputs, channel counts that are not a multiple of the vector width,
// one channel, two rows, more channels than one block column covers.
const BnCase kCases[] = {
    {"resnet_524288x64", {512, 32, 32, 64}},
    {"resnet_131072x128", {512, 16, 16, 128}},
    {"resnet_32768x256", {512, 8, 8, 256}},
    {"resnet_8192x512", {512, 4, 4, 512}},
    {"imagenet_c2048", {256, 7, 7, 2048}},
    {"two_dim_2x3", {2, 3}},
    {"two_dim_7x5", {7, 5}},
    {"two_dim_300x512", {300, 512}},
    {"two_dim_64x2", {64, 2}},
    {"c1", {3, 4, 4, 1}},
    {"c1_many_rows", {64, 32, 32, 1}},
    {"c3_many_rows", {64, 32, 32, 3}},
    {"c17", {2, 5, 5, 17}},
    {"c130", {2, 3, 3, 130}},
    {"odd", {4, 5, 6, 7}},
    {"batch1_7x7", {1, 7, 7, 10}},
    // Mean 100, spread 0.1: a sum-of-squares variance loses everything here in f32.
    {"offset_mean100", {64, 8, 8, 64}, 100.0, 0.1 * std::sqrt(3.0)},
    {"offset_mean100_c5", {16, 9, 9, 5}, 100.0, 0.1 * std::sqrt(3.0)},
    {"offset_mean100_resnet", {512, 16, 16, 128}, 100.0, 0.1 * std::sqrt(3.0)},
};

class GpuBatchNorm : public ::testing::TestWithParam<std::tuple<BnCase, DType>> {};

TEST_P(GpuBatchNorm, TrainEvalBackwardMatchCpu) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [cs, dtype] = GetParam();
  check_against_cpu(cs, dtype, 11);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuBatchNorm,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::ValuesIn(kDtypes)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

// ---- misaligned inputs: views one element into a buffer, so no vector load is aligned

TEST(GpuBatchNormAlignment, OffsetViewsMatchCpu) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  for (const DType dtype : kDtypes) {
    const BnCase cs{"offset_view", {4, 8, 8, 64}};
    const BnData d = make_data(cs, dtype, 21);
    const int64_t n = d.x.numel();
    const auto offset_view = [&](const Tensor& cpu) {
      Tensor buffer = Tensor::empty({n + 1}, dtype, Device::gpu(0));
      Tensor view = buffer.narrow(0, 1, n).view(cs.shape);
      view.copy_(cpu);
      return view;
    };
    const Tensor x = offset_view(d.x), dy = offset_view(d.dy);
    const Tensor w = gpu(d.weight), b = gpu(d.bias);

    Tensor rm_cpu = d.running_mean.clone(), rv_cpu = d.running_var.clone();
    const ops::BatchNormForward ref =
        ops::batch_norm_train(d.x, d.weight, d.bias, rm_cpu, rv_cpu, kMomentum, kEps);
    Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
    const ops::BatchNormForward out = ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps);
    expect_data(out.y, ref.y, dtype, "train y", mean_rounding(d.weight, ref.mean, ref.invstd));
    expect_f32(out.mean, ref.mean, "train mean");
    expect_f32(out.invstd, ref.invstd, "train invstd");
    expect_f32(rv, rv_cpu, "running_var");

    expect_data(ops::batch_norm_eval(x, w, b, gpu(d.running_mean), gpu(d.running_var), kEps),
                ops::batch_norm_eval(d.x, d.weight, d.bias, d.running_mean, d.running_var, kEps),
                dtype, "eval y");

    const ops::BatchNormGrads gref =
        ops::batch_norm_backward(d.dy, d.x, d.weight, ref.mean, ref.invstd);
    const ops::BatchNormGrads g =
        ops::batch_norm_backward(dy, x, w, gpu(ref.mean), gpu(ref.invstd));
    expect_data(g.dx, gref.dx, dtype, "dx", dx_terms(d.weight, ref.invstd, d.dy));
    expect_f32(g.dweight, gref.dweight, "dweight");
    expect_f32(g.dbias, gref.dbias, "dbias");
  }
}

// ---- determinism

// Every output of a training forward and a backward, as raw bytes on the CPU.
std::vector<std::vector<char>> run_bytes(const BnData& d, DType dtype) {
  const Tensor x = gpu(d.x, dtype), dy = gpu(d.dy, dtype);
  const Tensor w = gpu(d.weight), b = gpu(d.bias);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormForward f = ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps);
  const ops::BatchNormGrads g = ops::batch_norm_backward(dy, x, w, f.mean, f.invstd);
  const Tensor e = ops::batch_norm_eval(x, w, b, rm, rv, kEps);
  std::vector<std::vector<char>> out;
  const std::initializer_list<const Tensor*> outputs = {&f.y,  &f.mean,    &f.invstd, &rm, &rv,
                                                        &g.dx, &g.dweight, &g.dbias,  &e};
  for (const Tensor* t : outputs) {
    const Tensor host = t->to(Device::cpu());
    const char* p = static_cast<const char*>(host.data_ptr());
    out.emplace_back(p, p + host.nbytes());
  }
  return out;
}

TEST(GpuBatchNormDeterminism, RepeatedRunsAreBitIdentical) {
  HG_REQUIRE_GPU();
  // Many row blocks (partials) and two channel columns in bf16; one column in f32.
  const BnCase cases[] = {{"det_bf16", {64, 16, 16, 256}}, {"det_f32", {128, 16, 16, 64}}};
  for (const BnCase& cs : cases) {
    const DType dtype = cs.shape.back() == 256 ? DType::BF16 : DType::F32;
    const BnData d = make_data(cs, dtype, 31);
    const auto first = run_bytes(d, dtype);
    const auto second = run_bytes(d, dtype);
    ASSERT_EQ(first.size(), second.size());
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(first[i] == second[i]) << cs.name << ": output " << i << " differs";
  }
}

// ---- speed: reported, not asserted (timings vary with the machine and its load)

// Mean wall milliseconds of `fn` over `iterations` calls after a warm-up, waiting for the GPU
// at both ends (reading `done()` back to the CPU waits for everything issued before). The
// calls only issue work, so for large inputs this is the GPU's time; for small ones, the
// host's.
template <typename Fn, typename Done>
double wall_ms(int iterations, Fn&& fn, Done&& done) {
  fn();
  (void)done().to(Device::cpu());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) fn();
  (void)done().to(Device::cpu());
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / iterations;
}

// The bf16 ResNet-18 CIFAR step at batch 512 has five batch norms of each shape below; PyTorch
// (channels last) spends 3.2 ms of an H200 in batch-norm kernels for the step.
TEST(GpuBatchNormSpeed, ResNet18Bf16Report) {
  HG_REQUIRE_GPU();
  const Shape shapes[] = {
      {512, 32, 32, 64}, {512, 16, 16, 128}, {512, 8, 8, 256}, {512, 4, 4, 512}};
  double step_ms = 0;
  for (const Shape& shape : shapes) {
    const BnData d = make_data(BnCase{"speed", shape}, DType::BF16, 41);
    const Tensor x = gpu(d.x, DType::BF16), dy = gpu(d.dy, DType::BF16);
    const Tensor w = gpu(d.weight), b = gpu(d.bias);
    Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
    ops::BatchNormForward f;
    ops::BatchNormGrads g;
    Tensor y;
    const int n = 50;
    const double fwd = wall_ms(
        n, [&] { f = ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps); },
        [&] { return f.mean; });
    const double bwd = wall_ms(
        n, [&] { g = ops::batch_norm_backward(dy, x, w, f.mean, f.invstd); },
        [&] { return g.dbias; });
    const double eval = wall_ms(
        n, [&] { y = ops::batch_norm_eval(x, w, b, rm, rv, kEps); }, [&] { return rm; });
    const double gb = double(x.nbytes()) * 1e-9;
    // Forward reads x twice and writes y; backward reads dy and x twice and writes dx.
    std::cout << "[ speed    ] bf16 " << shape_numel(shape) / shape.back() << " x " << shape.back()
              << ": train forward " << fwd * 1e3 << " us (" << 3 * gb / (fwd * 1e-3)
              << " GB/s), backward " << bwd * 1e3 << " us (" << 5 * gb / (bwd * 1e-3)
              << " GB/s), eval " << eval * 1e3 << " us (" << 2 * gb / (eval * 1e-3) << " GB/s)\n";
    step_ms += 5 * (fwd + bwd);
  }
  std::cout << "[ speed    ] ResNet-18 CIFAR bf16 batch 512 step, batch norm: " << step_ms
            << " ms (PyTorch channels-last on an H200: 3.2 ms in its batch-norm kernels)\n";
}

// ---- argument errors the GPU backend itself checks

TEST(GpuBatchNormErrors, BackwardArgumentsAreInvalidInput) {
  HG_REQUIRE_GPU();
  const Tensor x = Tensor::zeros({2, 3, 3, 4}, DType::BF16, Device::gpu(0));
  const Tensor w = Tensor::full({4}, 1.0, DType::F32, Device::gpu(0));
  const Tensor s = Tensor::zeros({4}, DType::F32, Device::gpu(0));
  // Grad output of another dtype than the input.
  test::expect_invalid(
      [&] {
        ops::batch_norm_backward(Tensor::zeros({2, 3, 3, 4}, DType::F32, Device::gpu(0)), x, w, s,
                                 s);
      },
      {"batch_norm_backward"});
  // Saved statistics of the wrong length or dtype.
  test::expect_invalid(
      [&] { ops::batch_norm_backward(x, x, w, Tensor::zeros({3}, DType::F32, Device::gpu(0)), s); },
      {"saved mean"});
  test::expect_invalid(
      [&] {
        ops::batch_norm_backward(x, x, w, s, Tensor::zeros({4}, DType::BF16, Device::gpu(0)));
      },
      {"saved invstd"});
  // A parameter on the CPU.
  test::expect_invalid([&] { ops::batch_norm_backward(x, x, Tensor::full({4}, 1.0), s, s); },
                       {"weight"});
}

}  // namespace
}  // namespace hg
