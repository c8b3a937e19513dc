// The INT8 inference ops: quantize_int8, dequantize_int8 and conv2d_int8 (s8 and u8) on the CPU
// (oneDNN) against float64 references of the same quantised arithmetic, and the GPU against the
// CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "hourglass/base/rng.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/gpu.h"
#include "support/reference_conv_pool.h"

namespace hg {
namespace {

using test::random_values;

// round half to even, saturated to s8 or u8, NaN to 0.
int reference_q(double v, bool is_unsigned = false) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  return is_unsigned ? int(std::clamp(r, 0.0, 255.0)) : int(std::clamp(r, -128.0, 127.0));
}

std::vector<int> int8_values(const Tensor& t) {
  const Tensor c = t.to(Device::cpu());
  if (c.dtype() == DType::U8)
    return std::vector<int>(c.data<uint8_t>(), c.data<uint8_t>() + c.numel());
  return std::vector<int>(c.data<int8_t>(), c.data<int8_t>() + c.numel());
}

// Uniform integers in [lo, hi] as s8, or as u8 (lo >= 0).
Tensor random_int8(const Shape& shape, uint64_t seed, int lo = -128, int hi = 127,
                   DType dtype = DType::I8) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Philox rng(seed);
  std::vector<int> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = lo + int(rng(uint64_t(i), 0)[0] % uint32_t(hi - lo + 1));
  if (dtype == DType::U8)
    return Tensor::from_vector(std::vector<uint8_t>(v.begin(), v.end()), shape);
  return Tensor::from_vector(std::vector<int8_t>(v.begin(), v.end()), shape);
}

Tensor random_u8(const Shape& shape, uint64_t seed) {
  return random_int8(shape, seed, 0, 255, DType::U8);
}

TEST(QuantizeInt8, MatchesReferenceOnCpu) {
  std::vector<double> v = random_values(100003, 1, -3.0, 3.0);
  // Ties (half-way values round to even), the saturation edges, NaN and infinities.
  const double specials[] = {0.25,
                             0.75,
                             -0.25,
                             -1.25,
                             63.75,
                             63.8,
                             -64.1,
                             1e9,
                             -1e9,
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             -0.0};
  std::copy(std::begin(specials), std::end(specials), v.begin());
  const double inv_scale = 2.0;  // exact: x * 2 is exact, so the ties stay ties
  for (DType dt : {DType::F32, DType::F64, DType::BF16})
    for (DType qt : {DType::I8, DType::U8}) {
      const Tensor x = Tensor::from_vector(v, {int64_t(v.size())}).to(dt);
      const std::vector<double> held = test::to_doubles(x);
      const Tensor q = ops::quantize_int8(x, inv_scale, qt);
      ASSERT_EQ(q.dtype(), qt);
      const std::vector<int> got = int8_values(q);
      for (size_t i = 0; i < held.size(); ++i)
        ASSERT_EQ(got[i], reference_q(held[i] * inv_scale, qt == DType::U8))
            << dtype_name(dt) << " to " << dtype_name(qt) << " element " << i << " = " << held[i];
    }
  const Tensor ties =
      Tensor::from_vector(std::vector<float>{0.5f, 1.5f, 2.5f, 127.5f, 300.0f}, {5});
  EXPECT_EQ(int8_values(ops::quantize_int8(ties, 1.0)), (std::vector<int>{0, 2, 2, 127, 127}));
  EXPECT_EQ(int8_values(ops::quantize_int8(ties, 1.0, DType::U8)),
            (std::vector<int>{0, 2, 2, 128, 255}));
}

TEST(DequantizeInt8, IsTheProduct) {
  for (const Tensor& q : {random_int8({1000}, 2), random_u8({1000}, 2)}) {
    const std::vector<int> qs = int8_values(q);
    const Tensor x = ops::dequantize_int8(q, 0.0125);
    ASSERT_EQ(x.dtype(), DType::F32);
    for (int64_t i = 0; i < 1000; ++i)
      ASSERT_EQ(x.data<float>()[i], float(qs[size_t(i)]) * 0.0125f) << i;
  }
  const Tensor x = ops::dequantize_int8(random_int8({10}, 2), 1.0);
  EXPECT_THROW(ops::dequantize_int8(x, 1.0), Error);
  EXPECT_THROW(ops::quantize_int8(x, 0.0), Error);
}

struct ConvCase {
  int64_t n, h, w, c, k, r, stride, pad;
  bool residual, relu, f32_output;
  bool x_unsigned = false, residual_unsigned = false;
};

// The float64 reference of conv2d_int8: exact integer sums, then the epilogue.
std::vector<double> reference_conv(const ConvCase& g, const std::vector<int>& x,
                                   const std::vector<int>& w, const std::vector<double>& mult,
                                   const std::vector<double>& bias, const std::vector<int>& res,
                                   double res_mult, int64_t p, int64_t q) {
  std::vector<double> y(size_t(g.n * p * q * g.k));
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < p; ++oy)
      for (int64_t ox = 0; ox < q; ++ox)
        for (int64_t k = 0; k < g.k; ++k) {
          int64_t acc = 0;
          for (int64_t r = 0; r < g.r; ++r)
            for (int64_t s = 0; s < g.r; ++s) {
              const int64_t iy = oy * g.stride - g.pad + r, ix = ox * g.stride - g.pad + s;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              for (int64_t c = 0; c < g.c; ++c)
                acc += int64_t(x[size_t(((b * g.h + iy) * g.w + ix) * g.c + c)]) *
                       w[size_t(((k * g.r + r) * g.r + s) * g.c + c)];
            }
          const size_t i = size_t(((b * p + oy) * q + ox) * g.k + k);
          double v = (double(acc) + bias[size_t(k)]) * mult[size_t(k)];
          if (g.residual) v += res[i] * res_mult;
          if (g.relu) v = std::max(v, 0.0);
          y[i] = g.f32_output ? v : reference_q(v, g.relu);
        }
  return y;
}

struct ConvInputs {
  Tensor x, w, mult, bias, residual;
  Int8ConvParams p;
  std::vector<double> expected;
};

ConvInputs conv_inputs(const ConvCase& g, uint64_t seed) {
  ConvInputs in;
  in.x = g.x_unsigned ? random_u8({g.n, g.h, g.w, g.c}, seed)
                      : random_int8({g.n, g.h, g.w, g.c}, seed);
  in.w = random_int8({g.k, g.r, g.r, g.c}, seed + 1, -127, 127);
  in.p.conv.stride_h = in.p.conv.stride_w = g.stride;
  in.p.conv.pad_h = in.p.conv.pad_w = g.pad;
  in.p.relu = g.relu;
  in.p.f32_output = g.f32_output;
  in.p.residual_multiplier = g.residual ? 0.75 : 0.0;
  const int64_t p = conv_out_size(g.h, g.r, g.stride, g.pad);
  const int64_t q = conv_out_size(g.w, g.r, g.stride, g.pad);
  // Multipliers that spread the sums over the output's range (sums of r*r*c products of random
  // sign, each of root-mean-square x_rms * w_rms), and biases of a few output steps.
  const double fan = double(g.r * g.r * g.c);
  const double x_rms = (g.x_unsigned ? 255.0 : 128.0) / std::sqrt(3.0);
  const double w_rms = 127.0 / std::sqrt(3.0);
  std::vector<float> mult(size_t(g.k)), bias(size_t(g.k));
  const std::vector<double> u = random_values(2 * g.k, seed + 2, 0.5, 1.5);
  for (int64_t k = 0; k < g.k; ++k) {
    mult[size_t(k)] = float(u[size_t(k)] * 40.0 / (std::sqrt(fan) * x_rms * w_rms));
    bias[size_t(k)] = float((u[size_t(g.k + k)] - 1.0) * 10.0 / mult[size_t(k)]);
  }
  in.mult = Tensor::from_vector(mult, {g.k});
  in.bias = Tensor::from_vector(bias, {g.k});
  std::vector<int> res;
  if (g.residual) {
    in.residual = g.residual_unsigned ? random_u8({g.n, p, q, g.k}, seed + 3)
                                      : random_int8({g.n, p, q, g.k}, seed + 3);
    res = int8_values(in.residual);
  }
  in.expected = reference_conv(g, int8_values(in.x), int8_values(in.w), test::to_doubles(in.mult),
                               test::to_doubles(in.bias), res, 0.75, p, q);
  return in;
}

// u8 and s8 outputs: the float epilogue may land on the other side of a rounding boundary than
// the float64 one, so an output may be one step off, rarely; f32 outputs: float's relative
// error.
void expect_conv_matches(const Tensor& y, const std::vector<double>& expected, bool f32_output,
                         const std::string& what) {
  ASSERT_EQ(y.numel(), int64_t(expected.size())) << what;
  if (f32_output) {
    const std::vector<double> got = test::to_doubles(y);
    double scale = 1e-30;
    for (double e : expected) scale = std::max(scale, std::abs(e));
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-5 * scale) << what << " element " << i;
    return;
  }
  const std::vector<int> got = int8_values(y);
  int64_t off = 0, saturated = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::abs(got[i] - int(expected[i])), 1) << what << " element " << i;
    off += got[i] != int(expected[i]);
    saturated += expected[i] == 127 || expected[i] == -128 || expected[i] == 255;
  }
  EXPECT_LE(off * 100, int64_t(got.size())) << what << ": " << off << " outputs one step off";
  // The cases use the range without living at its edges.
  EXPECT_LE(saturated * 10, int64_t(got.size())) << what;
}

// Signed inputs are images; unsigned ones a ReLU's outputs. A ReLU's output is u8.
const ConvCase kCases[] = {
    {2, 9, 9, 3, 16, 3, 1, 1, false, true, false},                // a stem: 3 s8 channels
    {3, 8, 8, 32, 48, 3, 2, 1, false, true, false, true},         // stride 2, u8 in
    {2, 8, 8, 64, 64, 3, 1, 1, true, true, false, true, true},    // block end, u8 residual
    {2, 8, 8, 64, 64, 3, 1, 1, true, true, false, true, false},   // block end, s8 residual
    {2, 8, 8, 32, 64, 1, 2, 0, false, false, false, true},        // a downsampling shortcut
    {2, 6, 6, 16, 16, 3, 1, 1, true, false, false, true, false},  // residual without ReLU
    {5, 1, 1, 96, 10, 1, 1, 0, false, false, true, true},         // a classifier: f32 logits
};

TEST(Conv2dInt8, MatchesReferenceOnCpu) {
  uint64_t seed = 10;
  for (const ConvCase& g : kCases) {
    const ConvInputs in = conv_inputs(g, seed += 10);
    const Tensor y = ops::conv2d_int8(in.x, in.w, in.mult, in.bias, in.residual, in.p);
    EXPECT_EQ(y.dtype(), g.f32_output ? DType::F32 : g.relu ? DType::U8 : DType::I8);
    expect_conv_matches(y, in.expected, g.f32_output, fmt::format("case c{} k{}", g.c, g.k));
  }
}

// The CPU keeps each weight tensor's reordered copy: weights rewritten in place (a model's state
// loaded into the same tensors) are reordered again, not served from that copy.
TEST(Conv2dInt8, WeightsRewrittenInPlaceAreSeen) {
  const ConvCase& g = kCases[2];
  ConvInputs in = conv_inputs(g, 300);
  const ConvInputs other = conv_inputs(g, 400);
  expect_conv_matches(ops::conv2d_int8(in.x, in.w, in.mult, in.bias, in.residual, in.p),
                      in.expected, false, "first weights");
  in.w.copy_(other.w);
  const std::vector<double> expected =
      reference_conv(g, int8_values(in.x), int8_values(other.w), test::to_doubles(in.mult),
                     test::to_doubles(in.bias), int8_values(in.residual), 0.75, g.h, g.w);
  expect_conv_matches(ops::conv2d_int8(in.x, in.w, in.mult, in.bias, in.residual, in.p), expected,
                      false, "weights rewritten");
}

TEST(Conv2dInt8, RefusesBadOperands) {
  const ConvInputs in = conv_inputs(kCases[0], 5);
  const Tensor xf = ops::dequantize_int8(in.x, 1.0);
  EXPECT_THROW(ops::conv2d_int8(xf, in.w, in.mult, in.bias, Tensor(), in.p), Error);
  EXPECT_THROW(ops::conv2d_int8(in.x, in.w, in.bias.narrow(0, 0, 3), in.bias, Tensor(), in.p),
               Error);
  // A residual of the input's shape, not the output's.
  EXPECT_THROW(ops::conv2d_int8(in.x, in.w, in.mult, in.bias, in.x, in.p), Error);
}

// A ResNet stem's 3x3/2 pooling with padding and a plain 2x2/2 one, s8 and u8, against the
// reference and against the float round trip it replaces.
const test::ref::PoolShape kPoolCases[] = {{2, 9, 7, 16, {3, 3, 2, 2, 1, 1}},
                                           {3, 8, 6, 5, {2, 2, 2, 2, 0, 0}}};

TEST(MaxPoolInt8, MatchesReferenceOnCpu) {
  uint64_t seed = 500;
  for (const test::ref::PoolShape& g : kPoolCases)
    for (bool u8 : {false, true}) {
      const Tensor x =
          u8 ? random_u8({g.n, g.h, g.w, g.c}, ++seed) : random_int8({g.n, g.h, g.w, g.c}, ++seed);
      const Tensor y = ops::max_pool2d_int8(x, g.p);
      EXPECT_EQ(y.dtype(), x.dtype());
      EXPECT_EQ(test::to_doubles(y), test::ref::max_pool2d(test::to_doubles(x), g));
      const double s = 0.037;
      EXPECT_EQ(int8_values(y),
                int8_values(ops::quantize_int8(ops::max_pool2d(ops::dequantize_int8(x, s), g.p).y,
                                               1.0 / s, x.dtype())));
    }
  EXPECT_THROW(ops::max_pool2d_int8(ops::dequantize_int8(random_int8({1, 4, 4, 2}, 1), 1.0),
                                    kPoolCases[1].p),
               Error);
}

TEST(Int8Gpu, MatchesCpu) {
  HG_REQUIRE_GPU();
  const Device gpu = Device::gpu(0);
  const std::vector<double> v = random_values(300007, 7, -4.0, 4.0);
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (DType qt : {DType::I8, DType::U8}) {
      const Tensor x = Tensor::from_vector(v, {int64_t(v.size())}).to(dt);
      // The CPU has no f16: its reference is the same values in f32 (f16 widens exactly).
      const Tensor x_cpu = dt == DType::F16 ? x.to(DType::F32) : x;
      EXPECT_EQ(int8_values(ops::quantize_int8(x.to(gpu), 20.0, qt)),
                int8_values(ops::quantize_int8(x_cpu, 20.0, qt)))
          << dtype_name(dt) << " to " << dtype_name(qt);
    }
  for (const Tensor& q : {random_int8({4099}, 8), random_u8({4099}, 8)})
    EXPECT_EQ(test::to_doubles(ops::dequantize_int8(q.to(gpu), 0.37)),
              test::to_doubles(ops::dequantize_int8(q, 0.37)));
  for (const test::ref::PoolShape& g : kPoolCases)
    for (const Tensor& x :
         {random_int8({g.n, g.h, g.w, g.c}, 9), random_u8({g.n, g.h, g.w, g.c}, 9)})
      EXPECT_EQ(int8_values(ops::max_pool2d_int8(x.to(gpu), g.p)),
                int8_values(ops::max_pool2d_int8(x, g.p)));
  // The CPU's cases, then larger ones: a 7x7 stem of 3 channels, hundreds of pixels and output
  // channels, windows of 144 bytes, 24 channels (no multiple of 16), ResNet-50's classifier.
  static const ConvCase kGpuCases[] = {
      {3, 30, 30, 3, 64, 7, 2, 3, false, true, false},                // 7x7 stem, s8 in
      {1, 17, 17, 64, 128, 3, 1, 1, true, true, false, true, true},   // 289 pixels, u8 residual
      {2, 9, 9, 256, 200, 1, 1, 0, true, false, false, true, false},  // 200 channels, s8 out
      {1, 14, 14, 16, 48, 3, 2, 1, false, true, false, true},         // window of 144 bytes
      {2, 10, 10, 24, 72, 3, 1, 1, true, true, false, true, true},    // 24 channels: bytewise
      {4, 1, 1, 2048, 1000, 1, 1, 0, false, false, true, true},       // ResNet-50's classifier
  };
  std::vector<ConvCase> cases(std::begin(kCases), std::end(kCases));
  cases.insert(cases.end(), std::begin(kGpuCases), std::end(kGpuCases));
  uint64_t seed = 100;
  for (const ConvCase& g : cases) {
    const ConvInputs in = conv_inputs(g, seed += 10);
    const Tensor y = ops::conv2d_int8(in.x.to(gpu), in.w.to(gpu), in.mult.to(gpu), in.bias.to(gpu),
                                      in.residual.defined() ? in.residual.to(gpu) : Tensor(), in.p);
    expect_conv_matches(y, in.expected, g.f32_output, fmt::format("gpu case c{} k{}", g.c, g.k));
  }
}

}  // namespace
}  // namespace hg
