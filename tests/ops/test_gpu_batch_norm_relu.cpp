// GPU fused batch norm + residual add + ReLU (batch_norm_train / batch_norm_backward with a
// ReLU), and the pair of batch norms summed before the ReLU (the same with a shortcut),
// against the CPU backend (itself checked against float64 references in
// test_batch_norm_relu.cpp) in f32, bf16 and f16, with and without a residual, on ResNet-like
// and awkward shapes and misaligned views; and against the unfused GPU ops (batch_norm_train,
// add, relu, relu_backward, batch_norm_backward); plus determinism.
//
// Inputs are rounded to the GPU dtype on the CPU first, so both backends see the same values.
// Bounds are relative to the largest |reference| of each output, as in test_gpu_batch_norm.cpp:
//  - f32 results, every statistic and parameter gradient in every dtype: 1e-5 (a few f32 ulps
//    of statistics computed two ways, then a few rounded operations per output);
//  - bf16/f16 y, dx and dresidual: 1e-2 (one rounding of each output after f32 arithmetic),
//    plus half that on the mean signed error (bias).
// The backward runs from the CPU's y rounded to the dtype, so both backends apply the same ReLU
// mask (a mask that differs at one element is an error of that element's whole dy). Allocator
// poisoning is on: an output element the kernels leave unwritten is NaN, which fails the
// comparison (it rejects non-finite values first).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/gpu.h"

namespace hg {
namespace {

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

const DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};

double bound_of(DType dtype) { return dtype == DType::F32 ? 1e-5 : 1e-2; }

using test::PoisonGuard;

// got (a GPU tensor of `dtype`) against ref, within `bound` times the largest |ref| plus
// `extra`; finite values first.
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
void expect_data(const Tensor& got, const Tensor& ref, DType dtype, const std::string& what,
                 double extra = 0.0) {
  expect_close(got, ref, dtype, bound_of(dtype), what, extra);
}
void expect_f32(const Tensor& got, const Tensor& ref, const std::string& what) {
  expect_close(got, ref, DType::F32, 1e-5, what);
}

// The batch mean's f32 rounding may differ by an ulp between backends, which moves y by
// weight * invstd * |mean| * 2^-23 (test_gpu_batch_norm.cpp's mean_rounding).
double mean_rounding(const Tensor& weight, const Tensor& mean, const Tensor& invstd) {
  const std::vector<double> w = test::to_doubles(weight), m = test::to_doubles(mean),
                            is = test::to_doubles(invstd);
  double worst = 0;
  for (size_t c = 0; c < w.size(); ++c)
    worst = std::max(worst, std::abs(w[c]) * is[c] * std::abs(m[c]) * std::ldexp(1.0, -23));
  return worst;
}

// dx is a difference of terms of size |weight * invstd * dy| that may cancel: it is also
// allowed the f32 bound times that size (test_gpu_batch_norm.cpp's dx_terms).
double dx_terms(const Tensor& weight, const Tensor& invstd, const Tensor& dy) {
  const std::vector<double> w = test::to_doubles(weight), is = test::to_doubles(invstd),
                            g = test::to_doubles(dy);
  double coefficient = 0, grad = 0;
  for (size_t c = 0; c < w.size(); ++c) coefficient = std::max(coefficient, std::abs(w[c] * is[c]));
  for (const double v : g) grad = std::max(grad, std::abs(v));
  return bound_of(DType::F32) * coefficient * grad;
}

struct FusedCase {
  const char* name;
  Shape shape;  // [N,H,W,C] or [N,C]
  bool residual;
};

// A CPU f32 tensor of uniform values in [lo, hi), rounded to `dtype`.
Tensor cpu_values(const Shape& shape, uint64_t seed, DType dtype, double lo, double hi) {
  Tensor t = test::f32_tensor(test::random_values(shape_numel(shape), seed, lo, hi), shape);
  return dtype == DType::F32 ? t : t.to(dtype).to(DType::F32);
}

struct Data {
  Tensor x, residual, dy;                          // CPU f32, rounded to the dtype
  Tensor weight, bias, running_mean, running_var;  // CPU f32 [C]
};

Data make_data(const FusedCase& fc, DType dtype, uint64_t seed) {
  const int64_t c = fc.shape.back();
  Data d;
  d.x = cpu_values(fc.shape, seed, dtype, -1.5, 2.5);
  if (fc.residual) d.residual = cpu_values(fc.shape, seed + 6, dtype, -1.0, 1.0);
  d.dy = cpu_values(fc.shape, seed + 1, dtype, -1.0, 1.0);
  d.weight = cpu_values({c}, seed + 2, DType::F32, 0.5, 1.5);
  d.bias = cpu_values({c}, seed + 3, DType::F32, -0.5, 0.5);
  d.running_mean = cpu_values({c}, seed + 4, DType::F32, -0.2, 0.2);
  d.running_var = cpu_values({c}, seed + 5, DType::F32, 0.5, 2.0);
  return d;
}

Tensor gpu(const Tensor& cpu, DType dtype = DType::F32) {
  return cpu.defined() ? cpu.to(dtype).to(Device::gpu(0)) : cpu;
}

Tensor rounded(const Tensor& cpu, DType dtype) {
  return dtype == DType::F32 ? cpu : cpu.to(dtype).to(DType::F32);
}

ResidualGrad residual_grad_of(const Data& d) {
  return d.residual.defined() ? ResidualGrad::Compute : ResidualGrad::Skip;
}

// Forward and backward against the CPU; `x`, `residual`, `dy` are the GPU operands (maybe
// misaligned views) holding d's values.
void check_against_cpu(const Data& d, DType dtype, const Tensor& x, const Tensor& residual,
                       const Tensor& dy) {
  const Tensor w = gpu(d.weight), b = gpu(d.bias);
  Tensor rm_cpu = d.running_mean.clone(), rv_cpu = d.running_var.clone();
  const ops::BatchNormForward ref =
      ops::batch_norm_train(d.x, d.weight, d.bias, rm_cpu, rv_cpu, kMomentum, kEps,
                            {.relu = true, .residual = d.residual});
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormForward out =
      ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps, {.relu = true, .residual = residual});
  expect_data(out.y, ref.y, dtype, "y", mean_rounding(d.weight, ref.mean, ref.invstd));
  expect_f32(out.mean, ref.mean, "mean");
  expect_f32(out.invstd, ref.invstd, "invstd");
  expect_f32(rm, rm_cpu, "running_mean");
  expect_f32(rv, rv_cpu, "running_var");

  // Backward from the CPU's output rounded to the dtype: the same mask on both sides.
  const Tensor y = rounded(ref.y, dtype);
  const ResidualGrad rg = residual_grad_of(d);
  const ops::BatchNormGrads gref = ops::batch_norm_backward(
      d.dy, d.x, d.weight, ref.mean, ref.invstd, {.relu_output = y, .residual_grad = rg});
  const ops::BatchNormGrads g =
      ops::batch_norm_backward(dy, x, w, gpu(ref.mean), gpu(ref.invstd),
                               {.relu_output = gpu(y, dtype), .residual_grad = rg});
  expect_data(g.dx, gref.dx, dtype, "dx", dx_terms(d.weight, ref.invstd, d.dy));
  expect_f32(g.dweight, gref.dweight, "dweight");
  expect_f32(g.dbias, gref.dbias, "dbias");
  if (rg == ResidualGrad::Compute)
    expect_close(g.dresidual, gref.dresidual, dtype, 0.0, "dresidual (exact: dy or 0)");
  else
    EXPECT_FALSE(g.dresidual.defined());
}

// ResNet-18 CIFAR-like shapes at a smaller batch (the CPU reference is the cost), then small
// and awkward ones: [N,C], channel counts off the vector widths, one channel, two rows, more
// channels than one block column covers.
const FusedCase kCases[] = {
    {"resnet_65536x64_residual", {64, 32, 32, 64}, true},
    {"resnet_65536x64", {64, 32, 32, 64}, false},
    {"resnet_8192x128_residual", {32, 16, 16, 128}, true},
    {"resnet_1024x256", {16, 8, 8, 256}, false},
    {"resnet_128x512_residual", {8, 4, 4, 512}, true},
    {"odd_105x3_residual", {3, 5, 7, 3}, true},
    {"c17_residual", {2, 7, 7, 17}, true},
    {"c5", {16, 9, 9, 5}, false},
    {"single_channel_residual", {3, 4, 4, 1}, true},
    {"two_dim_residual", {5, 37}, true},
    {"two_rows_residual", {2, 6}, true},
    {"c2048_residual", {4, 3, 3, 2048}, true},
};

class GpuBatchNormRelu : public ::testing::TestWithParam<std::tuple<FusedCase, DType>> {};

TEST_P(GpuBatchNormRelu, ForwardAndBackwardMatchCpu) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [fc, dtype] = GetParam();
  const Data d = make_data(fc, dtype, 11);
  check_against_cpu(d, dtype, gpu(d.x, dtype), gpu(d.residual, dtype), gpu(d.dy, dtype));
}

// The fused ops against the unfused GPU ops they replace. Forward: the unfused path rounds the
// batch norm's output to the dtype before the add, the fused one rounds once, so the outputs
// agree within the dtype's bound. Backward from the same y: dz = relu_backward(dy, y) is
// exactly what the fused kernels compute on the fly, so the gradients agree to f32 rounding
// (the same sums in the same order; bit-identical is expected but not required).
TEST_P(GpuBatchNormRelu, FusedMatchesUnfusedGpuOps) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [fc, dtype] = GetParam();
  const Data d = make_data(fc, dtype, 31);
  const Tensor x = gpu(d.x, dtype), r = gpu(d.residual, dtype), dy = gpu(d.dy, dtype);
  const Tensor w = gpu(d.weight), b = gpu(d.bias);
  Tensor rm1 = gpu(d.running_mean), rv1 = gpu(d.running_var);
  Tensor rm2 = gpu(d.running_mean), rv2 = gpu(d.running_var);
  const ops::BatchNormForward fused =
      ops::batch_norm_train(x, w, b, rm1, rv1, kMomentum, kEps, {.relu = true, .residual = r});
  const ops::BatchNormForward bn = ops::batch_norm_train(x, w, b, rm2, rv2, kMomentum, kEps);
  const Tensor y = ops::relu(r.defined() ? ops::add(bn.y, r) : bn.y);
  // Two roundings against one: twice the bound.
  expect_close(fused.y, y.to(DType::F32).to(Device::cpu()), dtype, 2 * bound_of(dtype),
               "fused y against unfused");
  expect_f32(fused.mean, bn.mean.to(Device::cpu()), "mean");
  expect_f32(fused.invstd, bn.invstd.to(Device::cpu()), "invstd");
  expect_f32(rm1, rm2.to(Device::cpu()), "running_mean");
  expect_f32(rv1, rv2.to(Device::cpu()), "running_var");

  const ResidualGrad rg = residual_grad_of(d);
  const ops::BatchNormGrads g = ops::batch_norm_backward(
      dy, x, w, fused.mean, fused.invstd, {.relu_output = fused.y, .residual_grad = rg});
  const Tensor dz = ops::relu_backward(dy, fused.y);
  const ops::BatchNormGrads gu = ops::batch_norm_backward(dz, x, w, fused.mean, fused.invstd);
  const Tensor dz_host = dz.to(DType::F32).to(Device::cpu());
  expect_close(g.dx, gu.dx.to(DType::F32).to(Device::cpu()), dtype, bound_of(dtype), "dx",
               dx_terms(d.weight, fused.invstd.to(Device::cpu()), dz_host));
  expect_f32(g.dweight, gu.dweight.to(Device::cpu()), "dweight");
  expect_f32(g.dbias, gu.dbias.to(Device::cpu()), "dbias");
  if (rg == ResidualGrad::Compute)
    expect_close(g.dresidual, dz_host, dtype, 0.0, "dresidual against relu_backward");
}

// Host bytes of a tensor, for bit-for-bit comparisons.
std::vector<char> bytes_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  const char* p = static_cast<const char*>(host.data_ptr());
  return std::vector<char>(p, p + host.nbytes());
}

// A gradient in two parts (dy2: a value used twice) is the gradient of ops::add(dy, dy2), bit
// for bit: with a residual the kernels sum the parts while loading, without one the backend
// adds them first.
TEST_P(GpuBatchNormRelu, GradientInTwoPartsIsTheAddedGradient) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [fc, dtype] = GetParam();
  const Data d = make_data(fc, dtype, 51);
  const Data other = make_data(fc, dtype, 52);
  const Tensor x = gpu(d.x, dtype), r = gpu(d.residual, dtype);
  const Tensor dy = gpu(d.dy, dtype), dy2 = gpu(other.dy, dtype);
  const Tensor w = gpu(d.weight), b = gpu(d.bias);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormForward f =
      ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps, {.relu = true, .residual = r});
  const ResidualGrad rg = residual_grad_of(d);
  const ops::BatchNormGrads two = ops::batch_norm_backward(
      dy, x, w, f.mean, f.invstd, {.relu_output = f.y, .dy2 = dy2, .residual_grad = rg});
  const ops::BatchNormGrads one = ops::batch_norm_backward(
      ops::add(dy, dy2), x, w, f.mean, f.invstd, {.relu_output = f.y, .residual_grad = rg});
  EXPECT_EQ(bytes_of(two.dx), bytes_of(one.dx)) << "dx";
  EXPECT_EQ(bytes_of(two.dweight), bytes_of(one.dweight)) << "dweight";
  EXPECT_EQ(bytes_of(two.dbias), bytes_of(one.dbias)) << "dbias";
  if (rg == ResidualGrad::Compute) EXPECT_EQ(bytes_of(two.dresidual), bytes_of(one.dresidual));
  // And against the CPU from the same sum, rounded to the dtype as the GPU rounds it (the
  // comparisons reject non-finite values: an element the kernels left unwritten is NaN).
  const Tensor mean = f.mean.to(Device::cpu()), invstd = f.invstd.to(Device::cpu());
  const Tensor sum = rounded(ops::add(d.dy, other.dy), dtype);
  const ops::BatchNormGrads ref = ops::batch_norm_backward(
      sum, d.x, d.weight, mean, invstd,
      {.relu_output = f.y.to(DType::F32).to(Device::cpu()), .residual_grad = rg});
  expect_data(two.dx, ref.dx, dtype, "dx against the CPU", dx_terms(d.weight, invstd, sum));
  expect_f32(two.dweight, ref.dweight, "dweight against the CPU");
  expect_f32(two.dbias, ref.dbias, "dbias against the CPU");
}

// The forward's ReLU mask is y > 0, bit for bit (bits past the last channel zero; the
// allocator's poison would leave an unwritten byte all ones), whether the normalising pass
// stores it (16-bit types, channels a multiple of 8) or a pass over y does (f32, other channel
// counts); and the backward from the mask gives the bytes the backward from y gives.
TEST_P(GpuBatchNormRelu, MaskIsTheOutputAboveZeroAndBacksTheSameGradients) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [fc, dtype] = GetParam();
  const Data d = make_data(fc, dtype, 61);
  const Tensor x = gpu(d.x, dtype), r = gpu(d.residual, dtype), dy = gpu(d.dy, dtype);
  const Tensor w = gpu(d.weight), b = gpu(d.bias);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormForward f =
      ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps, {.relu = true, .residual = r});
  const int64_t c = fc.shape.back(), rows = d.x.numel() / c, stride = ops::relu_mask_bytes(c);
  ASSERT_TRUE(f.mask.defined());
  ASSERT_EQ(f.mask.shape(), (Shape{rows, stride}));
  const std::vector<float> y = f.y.to(DType::F32).to_vector<float>();
  const std::vector<char> m = bytes_of(f.mask);
  int64_t wrong = 0;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < stride * 8; ++j)
      wrong += bool((uint8_t(m[size_t(row * stride + j / 8)]) >> (j % 8)) & 1) !=
               (j < c && y[size_t(row * c + j)] > 0.0f);
  EXPECT_EQ(wrong, 0) << "mask bits that are not y > 0";
  const ResidualGrad rg = residual_grad_of(d);
  const ops::BatchNormGrads from_y = ops::batch_norm_backward(
      dy, x, w, f.mean, f.invstd, {.relu_output = f.y, .residual_grad = rg});
  const ops::BatchNormGrads from_mask = ops::batch_norm_backward(
      dy, x, w, f.mean, f.invstd, {.relu_output = f.mask, .residual_grad = rg});
  EXPECT_EQ(bytes_of(from_mask.dx), bytes_of(from_y.dx)) << "dx";
  EXPECT_EQ(bytes_of(from_mask.dweight), bytes_of(from_y.dweight)) << "dweight";
  EXPECT_EQ(bytes_of(from_mask.dbias), bytes_of(from_y.dbias)) << "dbias";
  if (rg == ResidualGrad::Compute)
    EXPECT_EQ(bytes_of(from_mask.dresidual), bytes_of(from_y.dresidual)) << "dresidual";
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuBatchNormRelu,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::ValuesIn(kDtypes)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

// Views one element into a buffer: no vector load of x, residual or dy is aligned.
TEST(GpuBatchNormReluAlignment, OffsetViewsMatchCpu) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  for (const DType dtype : kDtypes) {
    const FusedCase fc{"offset_view", {4, 8, 8, 64}, true};
    const Data d = make_data(fc, dtype, 21);
    const int64_t n = d.x.numel();
    const auto offset_view = [&](const Tensor& cpu) {
      Tensor buffer = Tensor::empty({n + 1}, dtype, Device::gpu(0));
      Tensor view = buffer.narrow(0, 1, n).view(fc.shape);
      view.copy_(cpu);
      return view;
    };
    check_against_cpu(d, dtype, offset_view(d.x), offset_view(d.residual), offset_view(d.dy));
  }
}

// Every output of a fused forward and backward, as raw bytes.
std::vector<std::vector<char>> run_bytes(const Data& d, DType dtype) {
  const Tensor x = gpu(d.x, dtype), r = gpu(d.residual, dtype), dy = gpu(d.dy, dtype);
  const Tensor w = gpu(d.weight), b = gpu(d.bias);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormForward f =
      ops::batch_norm_train(x, w, b, rm, rv, kMomentum, kEps, {.relu = true, .residual = r});
  const ops::BatchNormGrads g = ops::batch_norm_backward(
      dy, x, w, f.mean, f.invstd, {.relu_output = f.y, .residual_grad = ResidualGrad::Compute});
  std::vector<std::vector<char>> out;
  for (const Tensor* t : std::initializer_list<const Tensor*>{
           &f.y, &f.mean, &f.invstd, &rm, &rv, &g.dx, &g.dweight, &g.dbias, &g.dresidual}) {
    const Tensor host = t->to(Device::cpu());
    const char* p = static_cast<const char*>(host.data_ptr());
    out.emplace_back(p, p + host.nbytes());
  }
  return out;
}

TEST(GpuBatchNormReluDeterminism, RepeatedRunsAreBitIdentical) {
  HG_REQUIRE_GPU();
  const FusedCase fc{"many_blocks", {64, 16, 16, 64}, true};
  for (const DType dtype : kDtypes) {
    const Data d = make_data(fc, dtype, 41);
    EXPECT_EQ(run_bytes(d, dtype), run_bytes(d, dtype)) << dtype_name(dtype);
  }
}

// ---- the pair: relu(bn(x) + bn(x2))

struct PairData {
  Data first, second;  // second.x is x2; first.dy the gradient, second.dy its second part
};

PairData make_pair_data(const Shape& shape, DType dtype, uint64_t seed) {
  const FusedCase fc{"pair", shape, false};
  PairData p{make_data(fc, dtype, seed), make_data(fc, dtype, seed + 100)};
  p.second.x = cpu_values(shape, seed + 200, dtype, -2.0, 1.0);
  return p;
}

struct GpuPair {
  Tensor x, x2, w, b, w2, b2, rm, rv, rm2, rv2;
};

GpuPair to_gpu(const PairData& p, DType dtype) {
  return {gpu(p.first.x, dtype),     gpu(p.second.x, dtype),   gpu(p.first.weight),
          gpu(p.first.bias),         gpu(p.second.weight),     gpu(p.second.bias),
          gpu(p.first.running_mean), gpu(p.first.running_var), gpu(p.second.running_mean),
          gpu(p.second.running_var)};
}

ops::BatchNormForward pair_forward(GpuPair& g) {
  return ops::batch_norm_train(g.x, g.w, g.b, g.rm, g.rv, kMomentum, kEps,
                               {.relu = true, .shortcut = {g.x2, g.w2, g.b2, g.rm2, g.rv2}});
}

// ResNet downsampling shapes at smaller batches, then awkward ones (channels off the vector
// widths, [N,C], more channels than a block column covers).
const FusedCase kPairCases[] = {
    {"resnet_8192x128", {32, 16, 16, 128}, false},
    {"resnet_2048x256", {32, 8, 8, 256}, false},
    {"resnet_512x512", {32, 4, 4, 512}, false},
    {"c17", {2, 7, 7, 17}, false},
    {"two_dim", {5, 37}, false},
    {"c2048", {4, 3, 3, 2048}, false},
};

class GpuBatchNormPairRelu : public ::testing::TestWithParam<std::tuple<FusedCase, DType>> {};

// Forward and backward (the gradient in one part and in two) against the CPU. The backward
// runs on both sides from the GPU's mask; the second part of the gradient is added and rounded
// to the dtype on the CPU first, as the GPU rounds the sum.
TEST_P(GpuBatchNormPairRelu, ForwardAndBackwardMatchCpu) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [fc, dtype] = GetParam();
  const PairData p = make_pair_data(fc.shape, dtype, 71);
  GpuPair g = to_gpu(p, dtype);
  Tensor rm = p.first.running_mean.clone(), rv = p.first.running_var.clone();
  Tensor rm2 = p.second.running_mean.clone(), rv2 = p.second.running_var.clone();
  const ops::BatchNormForward ref = ops::batch_norm_train(
      p.first.x, p.first.weight, p.first.bias, rm, rv, kMomentum, kEps,
      {.relu = true, .shortcut = {p.second.x, p.second.weight, p.second.bias, rm2, rv2}});
  const ops::BatchNormForward out = pair_forward(g);
  expect_data(out.y, ref.y, dtype, "y",
              mean_rounding(p.first.weight, ref.mean, ref.invstd) +
                  mean_rounding(p.second.weight, ref.mean2, ref.invstd2));
  expect_f32(out.mean, ref.mean, "mean");
  expect_f32(out.invstd, ref.invstd, "invstd");
  expect_f32(out.mean2, ref.mean2, "mean2");
  expect_f32(out.invstd2, ref.invstd2, "invstd2");
  expect_f32(g.rm, rm, "running_mean");
  expect_f32(g.rv, rv, "running_var");
  expect_f32(g.rm2, rm2, "running_mean2");
  expect_f32(g.rv2, rv2, "running_var2");
  // The mask is the GPU's y > 0, bit for bit.
  const int64_t c = fc.shape.back(), rows = p.first.x.numel() / c;
  const std::vector<float> y = out.y.to(DType::F32).to_vector<float>();
  const std::vector<char> m = bytes_of(out.mask);
  int64_t wrong = 0;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < ops::relu_mask_bytes(c) * 8; ++j)
      wrong += bool((uint8_t(m[size_t(row * ops::relu_mask_bytes(c) + j / 8)]) >> (j % 8)) & 1) !=
               (j < c && y[size_t(row * c + j)] > 0.0f);
  EXPECT_EQ(wrong, 0) << "mask bits that are not y > 0";

  const Tensor mask = out.mask.to(Device::cpu());
  const Tensor mean = out.mean.to(Device::cpu()), invstd = out.invstd.to(Device::cpu());
  const Tensor mean2 = out.mean2.to(Device::cpu()), invstd2 = out.invstd2.to(Device::cpu());
  for (const bool two_parts : {false, true}) {
    const Tensor dy_cpu =
        two_parts ? rounded(ops::add(p.first.dy, p.second.dy), dtype) : p.first.dy;
    const ops::BatchNormGrads gref = ops::batch_norm_backward(
        dy_cpu, p.first.x, p.first.weight, mean, invstd,
        {.relu_output = mask, .shortcut = {p.second.x, p.second.weight, mean2, invstd2}});
    const ops::BatchNormGrads got =
        ops::batch_norm_backward(gpu(p.first.dy, dtype), g.x, g.w, out.mean, out.invstd,
                                 {.relu_output = out.mask,
                                  .dy2 = two_parts ? gpu(p.second.dy, dtype) : Tensor(),
                                  .shortcut = {g.x2, g.w2, out.mean2, out.invstd2}});
    const std::string part = two_parts ? " (two parts)" : "";
    expect_data(got.dx, gref.dx, dtype, "dx" + part, dx_terms(p.first.weight, invstd, dy_cpu));
    expect_data(got.dx2, gref.dx2, dtype, "dx2" + part, dx_terms(p.second.weight, invstd2, dy_cpu));
    expect_f32(got.dweight, gref.dweight, "dweight" + part);
    expect_f32(got.dbias, gref.dbias, "dbias" + part);
    expect_f32(got.dweight2, gref.dweight2, "dweight2" + part);
    expect_f32(got.dbias2, gref.dbias2, "dbias2" + part);
  }
}

// Against the GPU ops it replaces (the second batch norm, then the fused batch norm + residual
// + ReLU): the statistics are the same kernels' (bit for bit); y differs by the rounding of
// the second batch norm's output, which the pair does not store; the backward from the same
// mask gives the same gradients (the same sums: bit-identical expected, f32 rounding allowed).
TEST_P(GpuBatchNormPairRelu, MatchesTheOpsItReplaces) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [fc, dtype] = GetParam();
  const PairData p = make_pair_data(fc.shape, dtype, 81);
  GpuPair g = to_gpu(p, dtype), u = to_gpu(p, dtype);
  const ops::BatchNormForward f = pair_forward(g);
  const ops::BatchNormForward shortcut =
      ops::batch_norm_train(u.x2, u.w2, u.b2, u.rm2, u.rv2, kMomentum, kEps);
  const ops::BatchNormForward main = ops::batch_norm_train(
      u.x, u.w, u.b, u.rm, u.rv, kMomentum, kEps, {.relu = true, .residual = shortcut.y});
  expect_close(f.y, main.y.to(DType::F32).to(Device::cpu()), dtype, 2 * bound_of(dtype),
               "y against the unfused pair");
  EXPECT_EQ(bytes_of(f.mean), bytes_of(main.mean));
  EXPECT_EQ(bytes_of(f.invstd2), bytes_of(shortcut.invstd));
  EXPECT_EQ(bytes_of(g.rv), bytes_of(u.rv));
  EXPECT_EQ(bytes_of(g.rm2), bytes_of(u.rm2));

  const Tensor dy = gpu(p.first.dy, dtype), dy2 = gpu(p.second.dy, dtype);
  const ops::BatchNormGrads got = ops::batch_norm_backward(
      dy, g.x, g.w, f.mean, f.invstd,
      {.relu_output = f.mask, .dy2 = dy2, .shortcut = {g.x2, g.w2, f.mean2, f.invstd2}});
  const ops::BatchNormGrads gm = ops::batch_norm_backward(
      dy, g.x, g.w, f.mean, f.invstd,
      {.relu_output = f.mask, .dy2 = dy2, .residual_grad = ResidualGrad::Compute});
  const ops::BatchNormGrads gs =
      ops::batch_norm_backward(gm.dresidual, g.x2, g.w2, f.mean2, f.invstd2);
  const Tensor dz = gm.dresidual.to(DType::F32).to(Device::cpu());
  const auto host = [](const Tensor& t) { return t.to(DType::F32).to(Device::cpu()); };
  expect_close(got.dx, host(gm.dx), dtype, bound_of(dtype), "dx",
               dx_terms(p.first.weight, host(f.invstd), dz));
  expect_close(got.dx2, host(gs.dx), dtype, bound_of(dtype), "dx2",
               dx_terms(p.second.weight, host(f.invstd2), dz));
  expect_f32(got.dweight, host(gm.dweight), "dweight");
  expect_f32(got.dbias, host(gm.dbias), "dbias");
  expect_f32(got.dweight2, host(gs.dweight), "dweight2");
  expect_f32(got.dbias2, host(gs.dbias), "dbias2");
}

TEST_P(GpuBatchNormPairRelu, RepeatedRunsAreBitIdentical) {
  HG_REQUIRE_GPU();
  const auto& [fc, dtype_binding] = GetParam();
  const DType dtype = dtype_binding;  // a lambda may capture a variable, not a binding (clang 14)
  const PairData p = make_pair_data(fc.shape, dtype, 91);
  const auto run = [&] {
    GpuPair g = to_gpu(p, dtype);
    const ops::BatchNormForward f = pair_forward(g);
    const ops::BatchNormGrads gr =
        ops::batch_norm_backward(gpu(p.first.dy, dtype), g.x, g.w, f.mean, f.invstd,
                                 {.relu_output = f.mask,
                                  .dy2 = gpu(p.second.dy, dtype),
                                  .shortcut = {g.x2, g.w2, f.mean2, f.invstd2}});
    std::vector<std::vector<char>> out;
    for (const Tensor* t : std::initializer_list<const Tensor*>{
             &f.y, &f.mask, &f.mean, &f.invstd2, &g.rv2, &gr.dx, &gr.dx2, &gr.dweight, &gr.dbias,
             &gr.dweight2, &gr.dbias2})
      out.push_back(bytes_of(*t));
    return out;
  };
  EXPECT_EQ(run(), run());
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuBatchNormPairRelu,
                         ::testing::Combine(::testing::ValuesIn(kPairCases),
                                            ::testing::ValuesIn(kDtypes)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace hg
