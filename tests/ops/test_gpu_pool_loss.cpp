// The GPU backend's pooling, softmax cross-entropy, count_correct and dropout against the CPU
// backend, in f32, bf16 and f16 (inputs rounded to the dtype first, so the CPU reference sees
// exactly the GPU's inputs). Dropout masks must be bit-identical to the CPU's for the same
// (seed, offset). Outputs are allocated poisoned (NaN), so an unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>

#include "hourglass/base/rng.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/gpu.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#endif

namespace hg {
namespace {

using test::all_close;
using test::random_values;
using test::to_doubles;

const DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};

Device gpu0() { return Device::gpu(0); }

void poison_outputs() {
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);
#endif
}

// The same values (rounded to dtype) on the GPU in dtype and on the CPU in f32.
struct Input {
  Tensor gpu, cpu;
};
Input make_input(const std::vector<double>& values, const Shape& shape, DType dtype) {
  const Tensor rounded = test::f32_tensor(values, shape).to(dtype);
  return {rounded.to(gpu0()), rounded.to(DType::F32)};
}

// f32: float arithmetic against the CPU's (double where it accumulates), a few ulps of sums of
// at most a few hundred terms. bf16/f16: one rounding of the output to the dtype (2^-9 relative
// for bf16) plus float differences: 1e-2 of the output's scale, and an unbiased mean error.
test::Tolerance tol(DType dtype, double scale) {
  if (dtype == DType::F32) return {1e-5, 1e-6 * scale};
  return {1e-2, 1e-2 * scale, 1e-3 * scale};
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

Tensor labels_on(const std::vector<int64_t>& labels, Device device) {
  return Tensor::from_vector(labels, {int64_t(labels.size())}).to(device);
}

std::vector<int64_t> random_labels(int64_t n, int64_t classes, uint64_t seed) {
  const auto u = random_values(n, seed, 0.0, 1.0);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    labels[size_t(i)] = std::min<int64_t>(classes - 1, int64_t(u[size_t(i)] * double(classes)));
  return labels;
}

// ---------------------------------------------------------------- pooling

struct PoolCase {
  const char* name;
  int64_t n, h, w, c;
  Pool2dParams p;
};

// Non-overlapping and overlapping windows, padding, odd sizes where the floor drops the last
// row/column, batch 1, 7x7 maps, asymmetric windows, channel counts off the pack width (scalar
// path) and on it (vector path), a ResNet-stem-sized map and a window too large for the u8
// arg-max record.
const PoolCase kPoolCases[] = {
    {"k2s2_c5", 2, 8, 8, 5, {2, 2, 2, 2, 0, 0}},
    {"k3s2p1_odd_batch1", 1, 9, 9, 3, {3, 3, 2, 2, 1, 1}},
    {"k3s1p1_7x7", 2, 7, 7, 10, {3, 3, 1, 1, 1, 1}},
    {"asymmetric_c4", 2, 9, 8, 4, {3, 2, 2, 1, 1, 0}},
    {"floor_drops_edge", 3, 7, 5, 17, {2, 2, 2, 2, 0, 0}},
    {"whole_map", 1, 4, 4, 6, {4, 4, 4, 4, 0, 0}},
    {"c64_k3s2p1", 2, 8, 8, 64, {3, 3, 2, 2, 1, 1}},
    {"stem_k3s2p1", 4, 32, 32, 64, {3, 3, 2, 2, 1, 1}},
    {"c24_k2s1", 2, 5, 6, 24, {2, 2, 1, 1, 0, 0}},
    // 256 positions a window: the i32 workspace (smaller windows record theirs in a u8).
    {"k16_whole_map_i32", 2, 16, 16, 8, {16, 16, 16, 16, 0, 0}},
    // Stride 2 (the backward's 2x2-block kernel) with an i32 record, overlapping windows,
    // padding and an odd map.
    {"k16s2p1_i32_odd", 1, 21, 19, 8, {16, 16, 2, 2, 1, 1}},
    // Stride 2 with windows that skip inputs (1x1) and with windows of 4 rows.
    {"k1s2_skips", 2, 7, 6, 8, {1, 1, 2, 2, 0, 0}},
    {"k4s2p2_c16", 2, 11, 10, 16, {4, 4, 2, 2, 2, 2}},
};

std::string pool_label(const PoolCase& k, DType dtype) {
  return std::string(k.name) + " " + std::string(dtype_name(dtype));
}

Shape pooled_shape(const PoolCase& k) {
  return {k.n, conv_out_size(k.h, k.p.kernel_h, k.p.stride_h, k.p.pad_h),
          conv_out_size(k.w, k.p.kernel_w, k.p.stride_w, k.p.pad_w), k.c};
}

TEST(GpuPooling, MaxPoolMatchesCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (DType dtype : kDtypes)
    for (const PoolCase& k : kPoolCases) {
      SCOPED_TRACE(pool_label(k, dtype));
      const Shape ys = pooled_shape(k);
      const Input x = make_input(random_values(shape_numel({k.n, k.h, k.w, k.c}), 1, -2, 2),
                                 {k.n, k.h, k.w, k.c}, dtype);
      const Input dy = make_input(random_values(shape_numel(ys), 2, -1, 1), ys, dtype);
      const ops::MaxPoolForward g = ops::max_pool2d(x.gpu, k.p);
      const ops::MaxPoolForward c = ops::max_pool2d(x.cpu, k.p);
      ASSERT_EQ(g.y.shape(), ys);
      ASSERT_EQ(g.y.dtype(), dtype);
      // A maximum is one of the inputs: exact in every dtype.
      EXPECT_TRUE(all_close(g.y, to_doubles(c.y), {0, 0}));
      // Both backends send the gradient to the first maximum of the window, so rounded inputs
      // with ties still agree; an input collects at most kernel_h * kernel_w gradients.
      const Tensor dx = ops::max_pool2d_backward(dy.gpu, x.gpu, g.workspace, k.p);
      ASSERT_EQ(dx.shape(), x.gpu.shape());
      ASSERT_EQ(dx.dtype(), dtype);
      const auto ref = to_doubles(ops::max_pool2d_backward(dy.cpu, x.cpu, c.workspace, k.p));
      EXPECT_TRUE(all_close(dx, ref, tol(dtype, double(k.p.kernel_h * k.p.kernel_w))));
    }
}

TEST(GpuPooling, MaxPoolTiesGoToTheFirstMaximumAsOnTheCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  // relu output: mostly exact zeros, the case after a ResNet stem.
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Shape xs{2, 9, 9, 16};
    const Pool2dParams p{3, 3, 2, 2, 1, 1};
    const Input x0 = make_input(random_values(shape_numel(xs), 3, -1, 0.2), xs, dtype);
    const Input x{ops::relu(x0.gpu), ops::relu(x0.cpu)};
    const ops::MaxPoolForward g = ops::max_pool2d(x.gpu, p);
    const ops::MaxPoolForward c = ops::max_pool2d(x.cpu, p);
    const Input dy =
        make_input(random_values(shape_numel(g.y.shape()), 4, -1, 1), g.y.shape(), dtype);
    EXPECT_TRUE(all_close(g.y, to_doubles(c.y), {0, 0}));
    EXPECT_TRUE(all_close(ops::max_pool2d_backward(dy.gpu, x.gpu, g.workspace, p),
                          to_doubles(ops::max_pool2d_backward(dy.cpu, x.cpu, c.workspace, p)),
                          tol(dtype, 9)));
  }
}

TEST(GpuPooling, AvgPoolMatchesCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (DType dtype : kDtypes)
    for (const PoolCase& k : kPoolCases) {
      SCOPED_TRACE(pool_label(k, dtype));
      const Shape ys = pooled_shape(k);
      const Input x = make_input(random_values(shape_numel({k.n, k.h, k.w, k.c}), 5, -2, 2),
                                 {k.n, k.h, k.w, k.c}, dtype);
      const Input dy = make_input(random_values(shape_numel(ys), 6, -1, 1), ys, dtype);
      const Tensor y = ops::avg_pool2d(x.gpu, k.p);
      ASSERT_EQ(y.shape(), ys);
      ASSERT_EQ(y.dtype(), dtype);
      EXPECT_TRUE(all_close(y, to_doubles(ops::avg_pool2d(x.cpu, k.p)), tol(dtype, 2)));
      const Tensor dx = ops::avg_pool2d_backward(dy.gpu, x.gpu, k.p);
      ASSERT_EQ(dx.shape(), x.gpu.shape());
      EXPECT_TRUE(
          all_close(dx, to_doubles(ops::avg_pool2d_backward(dy.cpu, x.cpu, k.p)), tol(dtype, 1)));
    }
}

TEST(GpuPooling, GlobalAvgPoolMatchesCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  struct Case {
    int64_t n, h, w, c;
  };
  // ResNet heads (4x4 and 7x7 maps, 512 channels), odd channel counts, one pixel, a big map.
  const Case cases[] = {{2, 4, 4, 512}, {3, 7, 7, 10},  {1, 1, 1, 3},
                        {5, 3, 5, 17},  {1, 64, 64, 8}, {4, 7, 7, 2048}};
  for (DType dtype : kDtypes)
    for (const Case& k : cases) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " [" << k.n << "," << k.h << ","
                                      << k.w << "," << k.c << "]");
      const Shape xs{k.n, k.h, k.w, k.c};
      const Input x = make_input(random_values(shape_numel(xs), 7, -1, 2), xs, dtype);
      const Input dy = make_input(random_values(k.n * k.c, 8, -1, 1), {k.n, k.c}, dtype);
      const Tensor y = ops::global_avg_pool(x.gpu);
      ASSERT_EQ(y.shape(), (Shape{k.n, k.c}));
      ASSERT_EQ(y.dtype(), dtype);
      EXPECT_TRUE(all_close(y, to_doubles(ops::global_avg_pool(x.cpu)), tol(dtype, 2)));
      const Tensor dx = ops::global_avg_pool_backward(dy.gpu, x.gpu);
      ASSERT_EQ(dx.shape(), xs);
      ASSERT_EQ(dx.dtype(), dtype);
      EXPECT_TRUE(
          all_close(dx, to_doubles(ops::global_avg_pool_backward(dy.cpu, x.cpu)), tol(dtype, 1)));
    }
}

TEST(GpuPooling, RepeatedRunsAreBitIdentical) {
  HG_REQUIRE_GPU();
  const PoolCase& k = kPoolCases[6];
  const Pool2dParams& p = k.p;
  const Input x =
      make_input(random_values(k.n * k.h * k.w * k.c, 9, -2, 2), {k.n, k.h, k.w, k.c}, DType::F32);
  const ops::MaxPoolForward m = ops::max_pool2d(x.gpu, p);
  const Tensor dy = ops::relu(m.y);
  const auto run = [&] {
    std::vector<std::vector<float>> out;
    for (const Tensor& t :
         {ops::max_pool2d_backward(dy, x.gpu, m.workspace, p), ops::avg_pool2d(x.gpu, p),
          ops::avg_pool2d_backward(dy, x.gpu, p), ops::global_avg_pool(x.gpu)})
      out.push_back(t.to_vector<float>());
    return out;
  };
  EXPECT_EQ(run(), run());
}

// ---------------------------------------------------------------- cross-entropy

struct CeCase {
  int64_t n, c;
};
// Batch 1, one class (loss 0), odd sizes, CIFAR and ImageNet class counts, a large batch.
const CeCase kCeCases[] = {{1, 1},   {1, 10},    {5, 3},    {7, 2},
                           {64, 10}, {33, 1000}, {300, 17}, {1030, 100}};

TEST(GpuCrossEntropy, ForwardAndBackwardMatchCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (DType dtype : kDtypes)
    for (const CeCase& k : kCeCases)
      for (double s : {0.0, 0.1}) {
        SCOPED_TRACE(testing::Message()
                     << dtype_name(dtype) << " n=" << k.n << " c=" << k.c << " smoothing=" << s);
        const Input x = make_input(random_values(k.n * k.c, uint64_t(k.n * 31 + k.c), -4, 4),
                                   {k.n, k.c}, dtype);
        const auto labels = random_labels(k.n, k.c, uint64_t(k.c));
        const Tensor yg = labels_on(labels, gpu0()), yc = labels_on(labels, Device::cpu());
        const auto g = ops::cross_entropy(x.gpu, yg, s);
        const auto c = ops::cross_entropy(x.cpu, yc, s);
        ASSERT_EQ(g.loss.dtype(), DType::F32);
        ASSERT_EQ(g.loss.numel(), 1);
        ASSERT_EQ(g.loss.device(), gpu0());
        ASSERT_EQ(g.probs.shape(), (Shape{k.n, k.c}));
        // The loss is computed in float from the same inputs in every dtype: sums of C terms
        // per row, then of N rows.
        EXPECT_TRUE(
            all_close(g.loss, to_doubles(c.loss), test::tolerance_for(DType::F32, k.c + k.n)));
        EXPECT_TRUE(all_close(g.probs, to_doubles(c.probs), tol(dtype, 1)));
        for (double dloss : {1.0, 2.5}) {
          const auto ref =
              to_doubles(ops::cross_entropy_backward(Tensor::scalar(dloss), c.probs, yc, s));
          const Tensor dx = ops::cross_entropy_backward(Tensor::scalar(dloss, DType::F32, gpu0()),
                                                        g.probs, yg, s);
          ASSERT_EQ(dx.dtype(), dtype);
          EXPECT_TRUE(all_close(dx, ref, tol(dtype, dloss / double(k.n))));
        }
      }
}

TEST(GpuCrossEntropy, StableForExtremeLogits) {
  HG_REQUIRE_GPU();
  const std::vector<double> logits{1000, -1000, 0, 999, 88, 89, -50, -51};
  const std::vector<int64_t> labels{3, 0};
  const auto g = ops::cross_entropy(test::f32_tensor(logits, {2, 4}).to(gpu0()),
                                    labels_on(labels, gpu0()), 0.1);
  const auto c =
      ops::cross_entropy(test::f32_tensor(logits, {2, 4}), labels_on(labels, Device::cpu()), 0.1);
  EXPECT_TRUE(all_close(g.loss, to_doubles(c.loss), test::tolerance_for(DType::F32, 4)));
  EXPECT_TRUE(all_close(g.probs, to_doubles(c.probs), test::tolerance_for(DType::F32, 4)));
}

TEST(GpuCrossEntropy, LabelOutOfRangeGivesNaNWithoutFailing) {
  HG_REQUIRE_GPU();
  // The GPU cannot throw without waiting for the device: the bad row's loss, gradient and hit
  // are NaN instead, so the epoch's loss and accuracy show it.
  const Tensor logits = test::f32_tensor(random_values(12, 10), {4, 3}).to(gpu0());
  const Tensor bad = labels_on({0, 1, 3, -1}, gpu0());
  const auto f = ops::cross_entropy(logits, bad, 0.1);
  EXPECT_TRUE(std::isnan(f.loss.item()));
  for (double p : to_doubles(f.probs)) EXPECT_TRUE(std::isfinite(p));
  const auto dx = to_doubles(
      ops::cross_entropy_backward(Tensor::scalar(1.0, DType::F32, gpu0()), f.probs, bad, 0.1));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(std::isnan(dx[size_t(i)]), i >= 6) << "element " << i;
  EXPECT_TRUE(std::isnan(ops::count_correct(logits, bad).item()));
  // The device is still usable.
  EXPECT_TRUE(
      std::isfinite(ops::cross_entropy(logits, labels_on({0, 1, 2, 0}, gpu0()), 0.1).loss.item()));
}

// ---------------------------------------------------------------- count_correct

TEST(GpuCountCorrect, MatchesCpuOnRandomData) {
  HG_REQUIRE_GPU();
  poison_outputs();
  const CeCase cases[] = {{1, 1}, {1, 10}, {5000, 10}, {77, 1000}, {513, 3}};
  for (DType dtype : kDtypes)
    for (const CeCase& k : cases) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " n=" << k.n << " c=" << k.c);
      // Rounding to bf16/f16 creates ties; both backends give them to the first maximum.
      const Input x = make_input(random_values(k.n * k.c, 11), {k.n, k.c}, dtype);
      const auto labels = random_labels(k.n, k.c, 12);
      const Tensor got = ops::count_correct(x.gpu, labels_on(labels, gpu0()));
      EXPECT_EQ(got.dtype(), DType::F32);
      EXPECT_EQ(got.device(), gpu0());
      EXPECT_EQ(got.item(), ops::count_correct(x.cpu, labels_on(labels, Device::cpu())).item());
      for (int64_t top : {2, 5})  // top-k ranks ties as the CPU does
        EXPECT_EQ(ops::count_correct(x.gpu, labels_on(labels, gpu0()), top).item(),
                  ops::count_correct(x.cpu, labels_on(labels, Device::cpu()), top).item())
            << "k = " << top;
    }
}

TEST(GpuCountCorrect, FirstMaximumWinsTiesAndNaNAsOnTheCpu) {
  HG_REQUIRE_GPU();
  const std::vector<float> values{
      0.1f,      0.9f, 0.3f,       // argmax 1
      2.0f,      2.0f, 1.0f,       // tie: 0
      -1.f,      -3.f, -0.5f,      // 2
      5.0f,      1.0f, 5.0f,       // tie: 0
      NAN,       1.0f, 2.0f,       // NaN first: nothing compares greater, 0
      1.0f,      NAN,  2.0f,       // NaN later never wins: 2
      3.0f,      NAN,  2.0f,       // 0
      -INFINITY, NAN,  -INFINITY,  // 0
  };
  const Tensor cpu_logits = Tensor::from_vector(values, {8, 3});
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor logits = cpu_logits.to(dtype).to(gpu0());
    for (int64_t cls = 0; cls < 3; ++cls) {
      const std::vector<int64_t> labels(8, cls);
      EXPECT_EQ(ops::count_correct(logits, labels_on(labels, gpu0())).item(),
                ops::count_correct(cpu_logits, labels_on(labels, Device::cpu())).item())
          << "all labels " << cls;
    }
    EXPECT_EQ(ops::count_correct(logits, labels_on({1, 0, 2, 0, 0, 2, 0, 0}, gpu0())).item(), 8.0);
  }
}

TEST(GpuCountCorrect, EmptyBatchIsZero) {
  HG_REQUIRE_GPU();
  const Tensor logits = Tensor::empty({0, 10}, DType::F32, gpu0());
  const Tensor labels = Tensor::empty({0}, DType::I64, gpu0());
  EXPECT_EQ(ops::count_correct(logits, labels).item(), 0.0);
}

// ---------------------------------------------------------------- dropout

// The documented rule, written out independently of both kernels.
bool reference_keep(uint64_t seed, uint64_t index, double p) {
  const Philox::Block block = Philox(seed)(index / 4, 0);
  return double(uniform_from_bits(block[index % 4])) >= p;
}

TEST(GpuDropout, MasksAreBitIdenticalToTheCpu) {
  HG_REQUIRE_GPU();
  poison_outputs();
  const int64_t sizes[] = {1, 3, 4, 5, 7, 1001, 50001, (int64_t(1) << 20) + 3};
  const uint64_t offsets[] = {0, 1, 2, 3, 6, (uint64_t(1) << 40) + 1};
  for (DType dtype : kDtypes)
    for (int64_t n : sizes)
      for (uint64_t offset : offsets)
        for (double p : {0.0, 0.1, 0.5, 0.9}) {
          SCOPED_TRACE(testing::Message()
                       << dtype_name(dtype) << " n=" << n << " offset=" << offset << " p=" << p);
          const Tensor rounded = test::f32_tensor(random_values(n, 13, -2, 2), {n}).to(dtype);
          const auto g = ops::dropout(rounded.to(gpu0()), p, 1234, offset);
          const auto c = ops::dropout(rounded.to(DType::F32), p, 1234, offset);
          ASSERT_EQ(g.mask.dtype(), DType::U8);
          ASSERT_EQ(g.y.dtype(), dtype);
          ASSERT_EQ(g.mask.to_vector<uint8_t>(), c.mask.to_vector<uint8_t>());
          // y = x * (mask * scale) in f32 on both, then one rounding to the dtype: identical.
          ASSERT_EQ(g.y.to_vector<float>(), c.y.to(dtype).to_vector<float>());
          const Tensor dy = test::f32_tensor(random_values(n, 14, -1, 1), {n}).to(dtype);
          ASSERT_EQ(
              ops::dropout_backward(dy.to(gpu0()), g.mask, p).to_vector<float>(),
              ops::dropout_backward(dy.to(DType::F32), c.mask, p).to(dtype).to_vector<float>());
        }
}

TEST(GpuDropout, MaskFollowsThePhiloxRule) {
  HG_REQUIRE_GPU();
  const int64_t n = 50001;
  for (uint64_t offset : {uint64_t(0), uint64_t(3), uint64_t(1) << 40}) {
    const auto mask = ops::dropout(Tensor::full({n}, 1.0, DType::F32, gpu0()), 0.3, 99, offset)
                          .mask.to_vector<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(mask[size_t(i)], reference_keep(99, offset + uint64_t(i), 0.3))
          << "offset " << offset << " element " << i;
  }
}

TEST(GpuDropout, UnalignedViewsAndMultiDimensionalShapes) {
  HG_REQUIRE_GPU();
  poison_outputs();
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t n = 6 * 7 * 11;
    const Tensor base = test::f32_tensor(random_values(n + 1, 15), {n + 1}).to(dtype);
    const Tensor xg = base.to(gpu0()).narrow(0, 1, n).view({6, 7, 11});  // not 16-byte aligned
    const Tensor xc = base.to(DType::F32).narrow(0, 1, n).view({6, 7, 11});
    const auto g = ops::dropout(xg, 0.25, 5, 8);
    const auto c = ops::dropout(xc, 0.25, 5, 8);
    EXPECT_EQ(g.y.shape(), (Shape{6, 7, 11}));
    EXPECT_EQ(g.mask.to_vector<uint8_t>(), c.mask.to_vector<uint8_t>());
    EXPECT_EQ(g.y.to_vector<float>(), c.y.to(dtype).to_vector<float>());
  }
}

TEST(GpuDropout, EmptyTensor) {
  HG_REQUIRE_GPU();
  const auto f = ops::dropout(Tensor::empty({0, 4}, DType::F32, gpu0()), 0.5, 1, 0);
  EXPECT_EQ(f.y.numel(), 0);
  EXPECT_EQ(f.mask.numel(), 0);
  EXPECT_EQ(ops::dropout_backward(f.y, f.mask, 0.5).numel(), 0);
}

}  // namespace
}  // namespace hg
