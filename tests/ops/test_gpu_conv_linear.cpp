// GPU conv2d and linear, forward and backward, against the CPU backend (oneDNN in f32, itself
// checked against float64 references in test_conv2d.cpp / test_linear.cpp), in f32, TF32, bf16
// and f16, on random inputs and awkward shapes.
//
// The inputs are rounded to the GPU dtype on the CPU first, so the CPU computes in f32 from
// exactly the values the GPU sees: the differences left are accumulation order, TF32 rounding
// of the products' inputs, and the rounding of the outputs to bf16/f16. Bounds are relative to
// the largest |reference| of each output (values are of order 1):
//  - f32  1e-4: cuDNN may pick Winograd or FFT algorithms, whose transforms lose a few bits
//         against a direct sum (~1e-5 of the output scale on these shapes, more on unlucky
//         elements), and either library may split the reduction; 1e-5 would fail on correct
//         algorithms. A wrong index or a missed term is off by O(1), far above either bound.
//  - TF32 5e-3: inputs rounded to a 10-bit mantissa (2^-11 relative) before f32 accumulation.
//  - bf16/f16 1e-2: one rounding of each output (2^-9 for bf16, 2^-11 for f16) over f32
//         accumulation; plus a bound of half that on the mean signed error (bias).
// Allocator poisoning is on in every test: fresh GPU blocks are filled with NaN bytes, so an
// output element an op leaves unwritten fails the comparison (which rejects non-finite values).
// Each comparison runs twice: the first call benchmarks algorithms and caches the plan, the
// second runs the cached plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/gpu.h"

namespace hg {
namespace {

// CTest's gpu_conv_linear_nchw_only runs this binary with HOURGLASS_TEST_CUDNN_LAYOUT=nchw: the
// f32 convolutions then go through cuDNN's NCHW copies and their transposes.
[[maybe_unused]] const bool kChannelsFirstOnly = [] {
  const char* layout = std::getenv("HOURGLASS_TEST_CUDNN_LAYOUT");
  const bool on = layout != nullptr && std::string(layout) == "nchw";
  if (on) test::search_cudnn_channels_first_only();
  return on;
}();

// ---- modes and tolerances

enum class Mode { F32, Tf32, BF16, F16 };

DType dtype_of(Mode mode) {
  switch (mode) {
    case Mode::BF16: return DType::BF16;
    case Mode::F16: return DType::F16;
    default: return DType::F32;
  }
}

double bound_of(Mode mode) {
  switch (mode) {
    case Mode::F32: return 1e-4;
    case Mode::Tf32: return 5e-3;
    default: return 1e-2;
  }
}

std::string mode_name(Mode mode) {
  switch (mode) {
    case Mode::F32: return "f32";
    case Mode::Tf32: return "tf32";
    case Mode::BF16: return "bf16";
    default: return "f16";
  }
}

const Mode kModes[] = {Mode::F32, Mode::Tf32, Mode::BF16, Mode::F16};
void PrintTo(Mode mode, std::ostream* os) { *os << mode_name(mode); }

using test::PoisonGuard;

// While alive: f32 convolutions and products may (or may not) use TF32.
class Tf32Guard {
 public:
  explicit Tf32Guard(bool allow) : previous_(ops::allow_tf32()) { ops::set_allow_tf32(allow); }
  ~Tf32Guard() { ops::set_allow_tf32(previous_); }
  Tf32Guard(const Tf32Guard&) = delete;
  Tf32Guard& operator=(const Tf32Guard&) = delete;

 private:
  bool previous_;
};

// A CPU f32 tensor of uniform values in [-scale, scale), rounded to the mode's dtype: the
// exact values the GPU will get.
Tensor cpu_input(const Shape& shape, uint64_t seed, Mode mode, double scale = 1.0) {
  Tensor t = test::f32_tensor(test::random_values(shape_numel(shape), seed, -scale, scale), shape);
  const DType dtype = dtype_of(mode);
  return dtype == DType::F32 ? t : t.to(dtype).to(DType::F32);
}

Tensor to_gpu(const Tensor& cpu, Mode mode) { return cpu.to(dtype_of(mode)).to(Device::gpu(0)); }

// got (a GPU tensor of the mode's dtype) against the CPU f32 reference.
void expect_close(const Tensor& got, const Tensor& ref, Mode mode, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << " is undefined";
  EXPECT_TRUE(got.device().is_gpu()) << what << " is on " << got.device().str();
  EXPECT_EQ(got.dtype(), dtype_of(mode)) << what;
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  const std::vector<double> r = test::to_doubles(ref);
  double scale = 0;
  for (const double v : r) scale = std::max(scale, std::abs(v));
  if (scale == 0) scale = 1;
  const double bound = bound_of(mode) * scale;
  const bool low_precision = mode == Mode::BF16 || mode == Mode::F16;
  const test::Tolerance tol{0.0, bound, low_precision ? 0.5 * bound : -1.0};
  EXPECT_TRUE(test::all_close(got, r, tol)) << what << " (" << mode_name(mode) << ")";
}

// ---- conv2d

struct ConvCase {
  const char* name;
  int64_t n, h, w, c, k, r, s;
  Conv2dParams p;
  bool bias;

  Shape x_shape() const { return {n, h, w, c}; }
  Shape w_shape() const { return {k, r, s, c / p.groups}; }
  Shape y_shape() const {
    return {n, conv_out_size(h, r, p.stride_h, p.pad_h, p.dilation_h),
            conv_out_size(w, s, p.stride_w, p.pad_w, p.dilation_w), k};
  }
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

Conv2dParams params(int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  return p;
}

Conv2dParams asymmetric_params() {
  Conv2dParams p;
  p.stride_h = 2;
  p.pad_h = 1;
  p.dilation_w = 2;
  return p;
}

// Odd sizes, batch 1, stride 2, padding, dilation 2, groups 2, 1x1 and 7x7 kernels, channel
// counts 1 to 5 and 64 (and others off multiples of 8), with and without bias.
const ConvCase kConvCases[] = {
    {"basic3x3_bias", 2, 7, 7, 5, 6, 3, 3, params(1, 1), true},
    {"batch1_odd_stride2_c3", 1, 9, 11, 3, 4, 3, 3, params(2, 1), false},
    {"dilation2_bias", 2, 10, 9, 6, 5, 3, 3, params(1, 2, 2), true},
    {"groups2_bias", 2, 8, 8, 6, 10, 3, 3, params(1, 1, 1, 2), true},
    {"pointwise1x1", 3, 5, 5, 20, 17, 1, 1, params(1, 0), false},
    {"pointwise1x1_stride2_bias", 2, 8, 8, 16, 24, 1, 1, params(2, 0), true},
    {"stem7x7_stride2_c3", 1, 15, 15, 3, 8, 7, 7, params(2, 3), false},
    {"c64_3x3_bias", 2, 7, 7, 64, 64, 3, 3, params(1, 1), true},
    {"c64_stride2_to128", 4, 8, 8, 64, 128, 3, 3, params(2, 1), false},
    {"asymmetric_bias", 2, 9, 8, 4, 3, 3, 2, asymmetric_params(), true},
    // Stride 2 over at most 4 channels: rewritten over 2x2 pixel blocks (conv2d.cpp). Even and
    // odd sizes and kernels, 1 to 4 channels, with and without padding.
    {"stem7x7_stride2_c3_k64", 4, 32, 30, 3, 64, 7, 7, params(2, 3), false},
    {"stride2_5x5_c4_bias", 2, 13, 10, 4, 12, 5, 5, params(2, 2), true},
    {"stride2_4x4_c1_unpadded", 3, 11, 12, 1, 8, 4, 4, params(2, 0), false},
    {"stride2_3x3_c2_pad2", 2, 6, 7, 2, 16, 3, 3, params(2, 2), false},
    // The same with an even output width: in bf16 and f16 the forward runs over pairs of output
    // pixels (2x4 pixel blocks), windows of 1 to 3 blocks across.
    {"stem7x7_stride2_c3_k64_even", 4, 32, 32, 3, 64, 7, 7, params(2, 3), false},
    {"stride2_5x5_c4_bias_even", 2, 13, 12, 4, 12, 5, 5, params(2, 2), true},
    {"stride2_4x4_c1_unpadded_even", 3, 11, 10, 1, 8, 4, 4, params(2, 0), false},
    {"stride2_3x3_c2_pad2_even", 2, 6, 9, 2, 16, 3, 3, params(2, 2), false},
    {"stride2_2x2_c3_even", 2, 8, 8, 3, 24, 2, 2, params(2, 0), false},
};

// Inputs of order 1, weights scaled by 1/sqrt(fan-in) so outputs and gradients are of order 1.
struct ConvData {
  Tensor x, w, bias, dy;  // CPU f32, rounded to the mode's dtype
};

ConvData conv_data(const ConvCase& cc, Mode mode, uint64_t seed) {
  const double a = std::sqrt(3.0 / double(cc.c / cc.p.groups * cc.r * cc.s));
  ConvData d;
  d.x = cpu_input(cc.x_shape(), seed, mode);
  d.w = cpu_input(cc.w_shape(), seed + 1, mode, a);
  if (cc.bias) d.bias = cpu_input({cc.k}, seed + 2, mode);
  d.dy = cpu_input(cc.y_shape(), seed + 3, mode);
  return d;
}

using ConvParam = std::tuple<ConvCase, Mode>;

class GpuConv : public ::testing::TestWithParam<ConvParam> {};

TEST_P(GpuConv, ForwardAndBackwardMatchCpu) {
  HG_REQUIRE_GPU();
  const auto& [cc, mode] = GetParam();
  PoisonGuard poison;
  Tf32Guard tf32(mode == Mode::Tf32);
  const ConvData d = conv_data(cc, mode, 100);
  const Tensor y_ref = ops::conv2d(d.x, d.w, d.bias, cc.p);
  const ops::Conv2dGrads g_ref =
      ops::conv2d_backward(d.dy, d.x, d.w, cc.bias, cc.p, InputGrad::Compute);

  const Tensor x = to_gpu(d.x, mode), w = to_gpu(d.w, mode), dy = to_gpu(d.dy, mode);
  const Tensor bias = cc.bias ? to_gpu(d.bias, mode) : Tensor();
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE(testing::Message() << "call " << call);
    expect_close(ops::conv2d(x, w, bias, cc.p), y_ref, mode, "y");
    const ops::Conv2dGrads g = ops::conv2d_backward(dy, x, w, cc.bias, cc.p, InputGrad::Compute);
    expect_close(g.dx, g_ref.dx, mode, "dx");
    expect_close(g.dw, g_ref.dw, mode, "dw");
    if (cc.bias)
      expect_close(g.dbias, g_ref.dbias, mode, "dbias");
    else
      EXPECT_FALSE(g.dbias.defined());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuConv,
                         ::testing::Combine(::testing::ValuesIn(kConvCases),
                                            ::testing::ValuesIn(kModes)),
                         [](const ::testing::TestParamInfo<ConvParam>& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  mode_name(std::get<1>(info.param));
                         });

TEST(GpuConvInputGrad, SkipLeavesDxUndefined) {
  HG_REQUIRE_GPU();
  PoisonGuard poison;
  Tf32Guard tf32(false);
  const ConvCase& cc = kConvCases[0];  // with bias
  const ConvData d = conv_data(cc, Mode::F32, 200);
  const ops::Conv2dGrads ref = ops::conv2d_backward(d.dy, d.x, d.w, true, cc.p, InputGrad::Compute);
  const ops::Conv2dGrads g =
      ops::conv2d_backward(to_gpu(d.dy, Mode::F32), to_gpu(d.x, Mode::F32), to_gpu(d.w, Mode::F32),
                           true, cc.p, InputGrad::Skip);
  EXPECT_FALSE(g.dx.defined());
  expect_close(g.dw, ref.dw, Mode::F32, "dw");
  expect_close(g.dbias, ref.dbias, Mode::F32, "dbias");
}

// In deterministic mode the weight gradient (where fast algorithms accumulate with atomics)
// comes out bit-identical on every call, at a ResNet layer's shape.
TEST(GpuConvDeterminism, DeterministicModeRepeatsBitForBit) {
  HG_REQUIRE_GPU();
  ops::set_deterministic(true);
  const Conv2dParams p = params(1, 1);
  const Tensor x = to_gpu(cpu_input({64, 16, 16, 64}, 301, Mode::BF16), Mode::BF16);
  const Tensor w = to_gpu(cpu_input({64, 3, 3, 64}, 302, Mode::BF16), Mode::BF16);
  const Tensor dy = to_gpu(cpu_input({64, 16, 16, 64}, 303, Mode::BF16), Mode::BF16);
  const ops::Conv2dGrads a = ops::conv2d_backward(dy, x, w, false, p, InputGrad::Compute);
  const ops::Conv2dGrads b = ops::conv2d_backward(dy, x, w, false, p, InputGrad::Compute);
  ops::set_deterministic(false);
  EXPECT_EQ(a.dw.to(DType::F32).to_vector<float>(), b.dw.to(DType::F32).to_vector<float>());
  EXPECT_EQ(a.dx.to(DType::F32).to_vector<float>(), b.dx.to(DType::F32).to_vector<float>());
}

// Views at an offset from their allocation (a micro-batch cut from a batch) give the
// libraries pointers aligned to less than the allocator's 512 bytes.
TEST(GpuConvAlignment, OffsetViewsMatchCpu) {
  HG_REQUIRE_GPU();
  PoisonGuard poison;
  Tf32Guard tf32(false);
  for (const Mode mode : {Mode::F32, Mode::BF16}) {
    SCOPED_TRACE(mode_name(mode));
    const ConvCase& cc = kConvCases[0];  // 7x7x5 images: 245 elements, odd byte offsets
    const ConvData d = conv_data(cc, mode, 300);
    const Tensor big = cpu_input({cc.n + 1, cc.h, cc.w, cc.c}, 301, mode);
    const Tensor big_dy = cpu_input({cc.n + 1, cc.h, cc.w, cc.k}, 302, mode);
    const Tensor x_cpu = big.narrow(0, 1, cc.n), dy_cpu = big_dy.narrow(0, 1, cc.n);
    const Tensor y_ref = ops::conv2d(x_cpu, d.w, d.bias, cc.p);
    const ops::Conv2dGrads g_ref =
        ops::conv2d_backward(dy_cpu, x_cpu, d.w, true, cc.p, InputGrad::Compute);
    const Tensor x = to_gpu(big, mode).narrow(0, 1, cc.n);
    const Tensor dy = to_gpu(big_dy, mode).narrow(0, 1, cc.n);
    const Tensor w = to_gpu(d.w, mode), bias = to_gpu(d.bias, mode);
    expect_close(ops::conv2d(x, w, bias, cc.p), y_ref, mode, "y");
    const ops::Conv2dGrads g = ops::conv2d_backward(dy, x, w, true, cc.p, InputGrad::Compute);
    expect_close(g.dx, g_ref.dx, mode, "dx");
    expect_close(g.dw, g_ref.dw, mode, "dw");
    expect_close(g.dbias, g_ref.dbias, mode, "dbias");
  }
}

// ---- linear

struct LinearCase {
  const char* name;
  int64_t n, in, out;
  bool bias;
};

void PrintTo(const LinearCase& c, std::ostream* os) { *os << c.name; }

// Batch 1, odd sizes, a single input feature, and the classifier heads of the models.
const LinearCase kLinearCases[] = {
    {"batch1_7to3_bias", 1, 7, 3, true},  {"odd_17to9_bias", 5, 17, 9, true},
    {"one_feature", 3, 1, 40, true},      {"head_512to10_bias", 64, 512, 10, true},
    {"wide_64to130", 33, 64, 130, false}, {"square_256to512_bias", 128, 256, 512, true},
};

struct LinearData {
  Tensor x, w, bias, dy;
};

LinearData linear_data(const LinearCase& lc, Mode mode, uint64_t seed) {
  LinearData d;
  d.x = cpu_input({lc.n, lc.in}, seed, mode);
  d.w = cpu_input({lc.out, lc.in}, seed + 1, mode, std::sqrt(3.0 / double(lc.in)));
  if (lc.bias) d.bias = cpu_input({lc.out}, seed + 2, mode);
  d.dy = cpu_input({lc.n, lc.out}, seed + 3, mode);
  return d;
}

using LinearParam = std::tuple<LinearCase, Mode>;

class GpuLinear : public ::testing::TestWithParam<LinearParam> {};

TEST_P(GpuLinear, ForwardAndBackwardMatchCpu) {
  HG_REQUIRE_GPU();
  const auto& [lc, mode] = GetParam();
  PoisonGuard poison;
  Tf32Guard tf32(mode == Mode::Tf32);
  const LinearData d = linear_data(lc, mode, 400);
  const Tensor y_ref = ops::linear(d.x, d.w, d.bias);
  const ops::LinearGrads g_ref = ops::linear_backward(d.dy, d.x, d.w, lc.bias, InputGrad::Compute);

  const Tensor x = to_gpu(d.x, mode), w = to_gpu(d.w, mode), dy = to_gpu(d.dy, mode);
  const Tensor bias = lc.bias ? to_gpu(d.bias, mode) : Tensor();
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE(testing::Message() << "call " << call);
    expect_close(ops::linear(x, w, bias), y_ref, mode, "y");
    const ops::LinearGrads g = ops::linear_backward(dy, x, w, lc.bias, InputGrad::Compute);
    expect_close(g.dx, g_ref.dx, mode, "dx");
    expect_close(g.dw, g_ref.dw, mode, "dw");
    if (lc.bias)
      expect_close(g.dbias, g_ref.dbias, mode, "dbias");
    else
      EXPECT_FALSE(g.dbias.defined());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuLinear,
                         ::testing::Combine(::testing::ValuesIn(kLinearCases),
                                            ::testing::ValuesIn(kModes)),
                         [](const ::testing::TestParamInfo<LinearParam>& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  mode_name(std::get<1>(info.param));
                         });

TEST(GpuLinearInputGrad, SkipLeavesDxUndefined) {
  HG_REQUIRE_GPU();
  PoisonGuard poison;
  Tf32Guard tf32(false);
  const LinearCase& lc = kLinearCases[1];
  const LinearData d = linear_data(lc, Mode::F32, 500);
  const ops::LinearGrads ref = ops::linear_backward(d.dy, d.x, d.w, true, InputGrad::Compute);
  const ops::LinearGrads g = ops::linear_backward(to_gpu(d.dy, Mode::F32), to_gpu(d.x, Mode::F32),
                                                  to_gpu(d.w, Mode::F32), true, InputGrad::Skip);
  EXPECT_FALSE(g.dx.defined());
  expect_close(g.dw, ref.dw, Mode::F32, "dw");
  expect_close(g.dbias, ref.dbias, Mode::F32, "dbias");
}

TEST(GpuLinearAlignment, OffsetViewsMatchCpu) {
  HG_REQUIRE_GPU();
  PoisonGuard poison;
  Tf32Guard tf32(false);
  for (const Mode mode : {Mode::F32, Mode::BF16}) {
    SCOPED_TRACE(mode_name(mode));
    const LinearCase& lc = kLinearCases[1];  // rows of 17 and 9 elements: odd byte offsets
    const LinearData d = linear_data(lc, mode, 600);
    const Tensor big_x = cpu_input({lc.n + 1, lc.in}, 601, mode);
    const Tensor big_dy = cpu_input({lc.n + 1, lc.out}, 602, mode);
    const Tensor x_cpu = big_x.narrow(0, 1, lc.n), dy_cpu = big_dy.narrow(0, 1, lc.n);
    const Tensor y_ref = ops::linear(x_cpu, d.w, d.bias);
    const ops::LinearGrads g_ref =
        ops::linear_backward(dy_cpu, x_cpu, d.w, true, InputGrad::Compute);
    const Tensor x = to_gpu(big_x, mode).narrow(0, 1, lc.n);
    const Tensor dy = to_gpu(big_dy, mode).narrow(0, 1, lc.n);
    const Tensor w = to_gpu(d.w, mode), bias = to_gpu(d.bias, mode);
    expect_close(ops::linear(x, w, bias), y_ref, mode, "y");
    const ops::LinearGrads g = ops::linear_backward(dy, x, w, true, InputGrad::Compute);
    expect_close(g.dx, g_ref.dx, mode, "dx");
    expect_close(g.dw, g_ref.dw, mode, "dw");
    expect_close(g.dbias, g_ref.dbias, mode, "dbias");
  }
}

}  // namespace
}  // namespace hg
