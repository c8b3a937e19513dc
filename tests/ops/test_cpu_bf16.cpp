// The CPU backend in bf16 (precision = "bf16" on CPUs with AVX-512 BF16 or AMX): every op a
// ResNet's training and evaluation step runs, on bf16 tensors, against the float64 references of
// the f32 tests computed from exactly the bf16 inputs.
//
// Bounds, as in the GPU tests' bf16 mode: |got - ref| <= 1e-2 * max |ref| elementwise (one
// rounding of each output to bf16 is 2^-9 relative, over f32 accumulation), and the mean signed
// error at most half that (a bias, such as truncating instead of rounding, fails it). f32
// outputs (batch-norm statistics, the f32 gradient a bf16 one is added into) are held to f32
// bounds. The oneDNN cases skip on a CPU without bf16 instructions, naming what it lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "hourglass/base/half.h"
#include "hourglass/ops/backend.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/reference_conv_pool.h"
#include "support/reference_dense.h"

namespace hg {
namespace {

using test::ref::Values;

// Values rounded to bf16, and the CPU bf16 tensor holding exactly them.
struct Bf16Data {
  Values values;
  Tensor tensor;
};

Bf16Data bf16_data(int64_t n, const Shape& shape, uint64_t seed, double lo = -1.0,
                   double hi = 1.0) {
  Bf16Data d;
  d.values = test::random_values(n, seed, lo, hi);
  for (double& v : d.values) v = double(bf16_to_float(float_to_bf16(float(v))));
  d.tensor = test::f32_tensor(d.values, shape).to(DType::BF16);
  return d;
}

::testing::AssertionResult bf16_close(const Tensor& got, const Values& ref) {
  if (got.dtype() != DType::BF16)
    return ::testing::AssertionFailure() << "expected a bf16 result, got " << got.describe();
  double scale = 0;
  for (double v : ref) scale = std::max(scale, std::abs(v));
  scale = std::max(scale, 1e-30);
  return test::all_close(got, ref, test::Tolerance{0.0, 1e-2 * scale, 5e-3 * scale});
}

::testing::AssertionResult f32_close(const Tensor& got, const Values& ref) {
  return test::all_close(got, ref, test::Tolerance{1e-5, 1e-5});
}

// Skips a test of a oneDNN primitive on a CPU without bf16 instructions.
#define REQUIRE_CPU_BF16()                                                                     \
  do {                                                                                         \
    const std::string problem = backend_for(Device::cpu()).compute_dtype_problem(DType::BF16); \
    if (!problem.empty()) GTEST_SKIP() << problem;                                             \
  } while (0)

Conv2dParams conv_params(int64_t stride, int64_t pad, int64_t groups = 1) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.groups = groups;
  return p;
}

// ResNet shapes (3x3, stride 2, 1x1 shortcut, the 3-channel stem, a 4x4 map) and a grouped one.
TEST(CpuBf16, ConvolutionForwardAndBackwardMatchTheReference) {
  REQUIRE_CPU_BF16();
  const struct {
    test::ref::ConvShape sh;
    bool bias;
  } cases[] = {
      {{2, 8, 8, 16, 16, 3, 3, conv_params(1, 1)}, false},
      {{2, 9, 9, 16, 32, 3, 3, conv_params(2, 1)}, true},
      {{2, 8, 8, 16, 32, 1, 1, conv_params(2, 0)}, false},
      {{2, 10, 10, 3, 16, 3, 3, conv_params(1, 1)}, false},
      {{3, 4, 4, 32, 32, 3, 3, conv_params(1, 1)}, false},
      {{2, 6, 6, 8, 8, 3, 3, conv_params(1, 1, 2)}, true},
  };
  uint64_t seed = 100;
  for (const auto& cs : cases) {
    const test::ref::ConvShape& sh = cs.sh;
    SCOPED_TRACE(::testing::Message() << "input " << shape_str(sh.x_shape()) << " weight "
                                      << shape_str(sh.w_shape()) << " stride " << sh.p.stride_h);
    const double a = std::sqrt(3.0 / double(sh.c / sh.p.groups * sh.r * sh.s));
    const Bf16Data x = bf16_data(shape_numel(sh.x_shape()), sh.x_shape(), seed++);
    const Bf16Data w = bf16_data(shape_numel(sh.w_shape()), sh.w_shape(), seed++, -a, a);
    const Bf16Data dy = bf16_data(shape_numel(sh.y_shape()), sh.y_shape(), seed++);
    Bf16Data bias;
    if (cs.bias) bias = bf16_data(sh.k, {sh.k}, seed++);

    const Tensor y = ops::conv2d(x.tensor, w.tensor, bias.tensor, sh.p);
    EXPECT_TRUE(bf16_close(y, test::ref::conv2d(x.values, w.values, bias.values, sh))) << "y";

    const ops::Conv2dGrads g =
        ops::conv2d_backward(dy.tensor, x.tensor, w.tensor, cs.bias, sh.p, InputGrad::Compute);
    const test::ref::ConvGrads ref = test::ref::conv2d_backward(dy.values, x.values, w.values, sh);
    EXPECT_TRUE(bf16_close(g.dx, ref.dx)) << "dx";
    EXPECT_TRUE(bf16_close(g.dw, ref.dw)) << "dw";
    if (cs.bias) EXPECT_TRUE(bf16_close(g.dbias, ref.dbias)) << "dbias";
  }
}

TEST(CpuBf16, ConvolutionRefusesMixedDtypes) {
  const Tensor x = Tensor::zeros({1, 4, 4, 8}, DType::BF16);
  const Tensor w = Tensor::zeros({8, 3, 3, 8});
  try {
    ops::conv2d(x, w, Tensor(), conv_params(1, 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("dtype"), std::string::npos) << e.message();
  }
}

TEST(CpuBf16, LinearForwardAndBackwardMatchTheReference) {
  REQUIRE_CPU_BF16();
  const int64_t n = 13, in = 40, out = 10;
  const Bf16Data x = bf16_data(n * in, {n, in}, 1);
  const Bf16Data w = bf16_data(out * in, {out, in}, 2, -0.3, 0.3);
  const Bf16Data b = bf16_data(out, {out}, 3);
  const Bf16Data dy = bf16_data(n * out, {n, out}, 4);
  EXPECT_TRUE(bf16_close(ops::linear(x.tensor, w.tensor, b.tensor),
                         test::ref::linear(x.values, w.values, b.values, n, in, out)));
  const ops::LinearGrads g =
      ops::linear_backward(dy.tensor, x.tensor, w.tensor, true, InputGrad::Compute);
  const test::ref::LinearGrads ref =
      test::ref::linear_backward(dy.values, x.values, w.values, n, in, out);
  EXPECT_TRUE(bf16_close(g.dx, ref.dx)) << "dx";
  EXPECT_TRUE(bf16_close(g.dw, ref.dw)) << "dw";
  EXPECT_TRUE(bf16_close(g.dbias, ref.db)) << "dbias";
}

// Batch norm: bf16 activations and gradients, f32 parameters and statistics.
TEST(CpuBf16, BatchNormTrainEvalAndBackwardMatchTheReference) {
  const int64_t rows = 2 * 5 * 5, c = 24;
  const double eps = 1e-5;
  const Bf16Data x = bf16_data(rows * c, {2, 5, 5, c}, 7, -2.0, 3.0);
  const Bf16Data dy = bf16_data(rows * c, {2, 5, 5, c}, 8);
  const Values w = test::round_f32(test::random_values(c, 9, 0.5, 1.5));
  const Values b = test::round_f32(test::random_values(c, 10));
  const Tensor wt = test::f32_tensor(w, {c}), bt = test::f32_tensor(b, {c});
  Tensor rm = Tensor::zeros({c}), rv = Tensor::full({c}, 1.0);

  const ops::BatchNormForward f = ops::batch_norm_train(x.tensor, wt, bt, rm, rv, 0.1, eps);
  const test::ref::BatchNormTrain ref = test::ref::batch_norm_train(x.values, c, w, b, eps);
  EXPECT_TRUE(bf16_close(f.y, ref.y)) << "y";
  EXPECT_TRUE(f32_close(f.mean, ref.mean)) << "mean";
  EXPECT_TRUE(f32_close(f.invstd, ref.invstd)) << "invstd";
  Values rm_ref(static_cast<size_t>(c)), rv_ref(static_cast<size_t>(c));
  for (size_t j = 0; j < size_t(c); ++j) {
    rm_ref[j] = 0.1 * ref.mean[j];
    rv_ref[j] = 0.9 + 0.1 * ref.var_unbiased[j];
  }
  EXPECT_TRUE(f32_close(rm, rm_ref)) << "running mean";
  EXPECT_TRUE(f32_close(rv, rv_ref)) << "running var";

  const Tensor ye = ops::batch_norm_eval(x.tensor, wt, bt, rm, rv, eps);
  EXPECT_TRUE(bf16_close(ye, test::ref::batch_norm_eval(x.values, c, w, b, test::to_doubles(rm),
                                                        test::to_doubles(rv), eps)));

  const ops::BatchNormGrads g = ops::batch_norm_backward(dy.tensor, x.tensor, wt, f.mean, f.invstd);
  const test::ref::BatchNormGrads gref =
      test::ref::batch_norm_backward(dy.values, x.values, c, w, eps);
  EXPECT_TRUE(bf16_close(g.dx, gref.dx)) << "dx";
  EXPECT_EQ(g.dweight.dtype(), DType::F32);
  EXPECT_TRUE(test::all_close(g.dweight, gref.dweight, test::Tolerance{1e-4, 1e-4})) << "dweight";
  EXPECT_TRUE(test::all_close(g.dbias, gref.dbias, test::Tolerance{1e-4, 1e-4})) << "dbias";
}

// The fused batch norm + residual + ReLU: its mask is y > 0 bit for bit, and its backward from
// the mask equals the unfused ops' (C = 20 leaves a partly used mask byte per row).
TEST(CpuBf16, BatchNormReluMaskAndBackwardMatchTheUnfusedOps) {
  const int64_t c = 20;
  const Shape shape{3, 4, 4, c};
  const int64_t n = shape_numel(shape);
  const Bf16Data x = bf16_data(n, shape, 21), res = bf16_data(n, shape, 22),
                 dy = bf16_data(n, shape, 23);
  const Tensor w = Tensor::full({c}, 1.0), b = Tensor::zeros({c});
  Tensor rm = Tensor::zeros({c}), rv = Tensor::full({c}, 1.0), rm2 = rm.clone(), rv2 = rv.clone();

  const ops::BatchNormForward fused = ops::batch_norm_train(x.tensor, w, b, rm, rv, 0.1, 1e-5,
                                                            {.relu = true, .residual = res.tensor});
  const ops::BatchNormForward plain = ops::batch_norm_train(x.tensor, w, b, rm2, rv2, 0.1, 1e-5);
  const Tensor y = ops::relu(ops::add(plain.y, res.tensor));
  ASSERT_EQ(fused.y.dtype(), DType::BF16);
  EXPECT_EQ(test::to_doubles(fused.y), test::to_doubles(y));
  const std::vector<double> yv = test::to_doubles(y);
  const std::vector<double> mask = test::to_doubles(fused.mask);
  const int64_t stride = ops::relu_mask_bytes(c);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = i / c, j = i % c;
    const bool bit = (int(mask[size_t(r * stride + j / 8)]) >> (j % 8)) & 1;
    ASSERT_EQ(bit, yv[size_t(i)] > 0) << "element " << i;
  }

  const ops::BatchNormGrads g =
      ops::batch_norm_backward(dy.tensor, x.tensor, w, fused.mean, fused.invstd,
                               {.relu_output = fused.mask, .residual_grad = ResidualGrad::Compute});
  const Tensor dz = ops::relu_backward(dy.tensor, y);
  const ops::BatchNormGrads gp =
      ops::batch_norm_backward(dz, x.tensor, w, plain.mean, plain.invstd);
  EXPECT_EQ(test::to_doubles(g.dresidual), test::to_doubles(dz));
  EXPECT_EQ(test::to_doubles(g.dx), test::to_doubles(gp.dx));
  EXPECT_EQ(test::to_doubles(g.dweight), test::to_doubles(gp.dweight));
}

TEST(CpuBf16, PoolingMatchesTheReference) {
  REQUIRE_CPU_BF16();
  Pool2dParams p;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.pad_h = p.pad_w = 1;
  const test::ref::PoolShape sh{2, 9, 9, 16, p};
  const Bf16Data x = bf16_data(shape_numel(sh.x_shape()), sh.x_shape(), 31);
  const Bf16Data dy = bf16_data(shape_numel(sh.y_shape()), sh.y_shape(), 32);

  const ops::MaxPoolForward mp = ops::max_pool2d(x.tensor, p);
  EXPECT_TRUE(bf16_close(mp.y, test::ref::max_pool2d(x.values, sh))) << "max";
  EXPECT_TRUE(bf16_close(ops::max_pool2d_backward(dy.tensor, x.tensor, mp.workspace, p),
                         test::ref::max_pool2d_backward(dy.values, x.values, sh)))
      << "max backward";
  EXPECT_TRUE(bf16_close(ops::avg_pool2d(x.tensor, p), test::ref::avg_pool2d(x.values, sh)))
      << "avg";
  EXPECT_TRUE(bf16_close(ops::avg_pool2d_backward(dy.tensor, x.tensor, p),
                         test::ref::avg_pool2d_backward(dy.values, sh)))
      << "avg backward";
}

TEST(CpuBf16, GlobalAveragePoolingMatchesTheReference) {
  const Bf16Data x = bf16_data(2 * 4 * 4 * 24, {2, 4, 4, 24}, 41);
  const Bf16Data dy = bf16_data(2 * 24, {2, 24}, 42);
  EXPECT_TRUE(bf16_close(ops::global_avg_pool(x.tensor),
                         test::ref::global_avg_pool(x.values, 2, 4, 4, 24)));
  EXPECT_TRUE(bf16_close(ops::global_avg_pool_backward(dy.tensor, x.tensor),
                         test::ref::global_avg_pool_backward(dy.values, 2, 4, 4, 24)));
}

// The element-wise ops widen to float and round each result once: exactly the bf16 rounding of
// the float64 formula wherever float computes it exactly (add of two bf16 values, relu, scaling
// by a power of two), checked bit for bit; long enough (100003) to run on several threads.
TEST(CpuBf16, ElementwiseOpsRoundOnceToBf16) {
  const int64_t n = 100003;
  const Bf16Data a = bf16_data(n, {n}, 51, -4.0, 4.0), b = bf16_data(n, {n}, 52, -4.0, 4.0);
  auto rounded = [](double v) { return double(bf16_to_float(float_to_bf16(float(v)))); };
  Values sum(static_cast<size_t>(n)), relu(static_cast<size_t>(n)),
      relu_grad(static_cast<size_t>(n)), half(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i) {
    sum[i] = rounded(a.values[i] + b.values[i]);
    relu[i] = std::max(a.values[i], 0.0);
    relu_grad[i] = relu[i] > 0 ? b.values[i] : 0.0;
    half[i] = a.values[i] * 0.5;
  }
  EXPECT_EQ(test::to_doubles(ops::add(a.tensor, b.tensor)), sum);
  const Tensor r = ops::relu(a.tensor);
  EXPECT_EQ(r.dtype(), DType::BF16);
  EXPECT_EQ(test::to_doubles(r), relu);
  EXPECT_EQ(test::to_doubles(ops::relu_backward(b.tensor, r)), relu_grad);
  Tensor scaled = a.tensor.clone();
  ops::mul_scalar_(scaled, 0.5);
  EXPECT_EQ(test::to_doubles(scaled), half);
  Tensor acc = a.tensor.clone();
  ops::add_(acc, b.tensor);
  EXPECT_EQ(test::to_doubles(acc), sum);

  // A bf16 gradient added into an f32 one: the f32 sum of the two, no bf16 rounding.
  Tensor grad = test::f32_tensor(a.values, {n});
  ops::accumulate_({grad}, {b.tensor});
  Values f32_sum(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i) f32_sum[i] = double(float(a.values[i] + b.values[i]));
  EXPECT_EQ(test::to_doubles(grad), f32_sum);

  // sqrt and tanh: bounded by one bf16 rounding of the float64 value.
  const Bf16Data pos = bf16_data(n, {n}, 53, 0.0, 9.0);
  Values root(static_cast<size_t>(n)), th(static_cast<size_t>(n));
  for (size_t i = 0; i < size_t(n); ++i) {
    root[i] = std::sqrt(pos.values[i]);
    th[i] = std::tanh(a.values[i]);
  }
  EXPECT_TRUE(bf16_close(ops::sqrt(pos.tensor), root));
  EXPECT_TRUE(bf16_close(ops::tanh(a.tensor), th));
}

TEST(CpuBf16, NanStaysNanThroughTheRounding) {
  const Tensor x = Tensor::from_vector<float>({std::nanf(""), -1.0f, 2.0f}, {3}).to(DType::BF16);
  const std::vector<double> y = test::to_doubles(ops::add(x, x));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], -2.0);
  EXPECT_EQ(y[2], 4.0);
}

TEST(CpuBf16, DropoutScalesTheKeptElements) {
  const int64_t n = 4096;
  const Bf16Data x = bf16_data(n, {n}, 61);
  const ops::DropoutForward f = ops::dropout(x.tensor, 0.5, 7, 0);
  const std::vector<double> y = test::to_doubles(f.y), m = test::to_doubles(f.mask);
  int64_t kept = 0;
  for (size_t i = 0; i < size_t(n); ++i) {
    ASSERT_EQ(y[i], m[i] != 0 ? 2.0 * x.values[i] : 0.0) << i;
    kept += m[i] != 0;
  }
  EXPECT_GT(kept, n / 4);
  EXPECT_LT(kept, 3 * n / 4);
  const std::vector<double> dx = test::to_doubles(ops::dropout_backward(x.tensor, f.mask, 0.5));
  EXPECT_EQ(dx, y);
}

TEST(CpuBf16, CountCorrectReadsBf16Logits) {
  const Tensor logits =
      Tensor::from_vector<float>({0.1f, 0.9f, 0.0f, 2.0f, -1.0f, 1.0f}, {3, 2}).to(DType::BF16);
  const Tensor labels = Tensor::from_vector<int64_t>({1, 1, 0}, {3});
  EXPECT_EQ(ops::count_correct(logits, labels).item(), 2.0);
}

// Evaluation computes the loss of bf16 logits directly: the loss in f32 from the widened
// logits, the probabilities (what the backward reads) rounded to bf16.
TEST(CpuBf16, CrossEntropyReadsBf16Logits) {
  const int64_t n = 6, c = 10;
  const Bf16Data logits = bf16_data(n * c, {n, c}, 71, -3.0, 3.0);
  const std::vector<int64_t> labels{0, 3, 9, 2, 2, 7};
  const Tensor lt = Tensor::from_vector<int64_t>(labels, {n});
  const ops::CrossEntropyForward f = ops::cross_entropy(logits.tensor, lt, 0.1);
  const test::ref::CrossEntropy ref = test::ref::cross_entropy(logits.values, labels, n, c, 0.1);
  EXPECT_TRUE(test::all_close(f.loss, {ref.loss}, test::Tolerance{1e-5, 1e-5}));
  EXPECT_TRUE(bf16_close(f.probs, ref.probs));
  const Tensor dx = ops::cross_entropy_backward(Tensor::scalar(1.0, DType::F32), f.probs, lt, 0.1);
  EXPECT_TRUE(
      bf16_close(dx, test::ref::cross_entropy_backward(1.0, logits.values, labels, n, c, 0.1)));
}

}  // namespace
}  // namespace hg
