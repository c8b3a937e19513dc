// GPU batch norm + ReLU + max pooling in training (batch_norm_relu_max_pool_train / _backward):
// bit for bit against the GPU ops it replaces (batch_norm_relu_train, then max_pool2d of its
// output: the pooled output, the arg-max record, the ReLU mask, the saved and running
// statistics; backward max_pool2d_backward, then batch_norm_relu_backward) in f32,
// bf16 and f16, on stem shapes the fused kernel covers and on shapes it leaves to those ops
// (odd sizes, channels off the vector width, other windows); against the CPU within each
// dtype's bound; and repeated runs give the same bits. Allocator poisoning is on: a mask byte
// or output the kernel leaves unwritten differs from the unfused ops' bytes.
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

using test::PoisonGuard;

struct PoolCase {
  const char* name;
  Shape shape;  // [N,H,W,C]
  Pool2dParams pool;
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

constexpr Pool2dParams kStem{3, 3, 2, 2, 1, 1};
const PoolCase kCases[] = {
    {"stem_64ch", {8, 32, 28, 64}, kStem},      // ResNet-50's stem, smaller
    {"stem_16ch_2x2", {3, 2, 2, 16}, kStem},    // one window a 2x2 block
    {"stem_odd_height", {2, 9, 8, 16}, kStem},  // not tiled by 2x2 blocks: unfused
    {"stem_c12", {2, 8, 8, 12}, kStem},         // channels off the vector width: unfused
    {"window2", {2, 8, 8, 16}, Pool2dParams{2, 2, 2, 2, 0, 0}},  // another window: unfused
};
const DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};

struct Data {
  Tensor x;                                        // CPU f32, rounded to the dtype
  Tensor weight, bias, running_mean, running_var;  // CPU f32 [C]
};

Tensor cpu_values(const Shape& shape, uint64_t seed, DType dtype, double lo, double hi) {
  Tensor t = test::f32_tensor(test::random_values(shape_numel(shape), seed, lo, hi), shape);
  return dtype == DType::F32 ? t : t.to(dtype).to(DType::F32);
}

Data make_data(const Shape& shape, DType dtype, uint64_t seed) {
  const int64_t c = shape.back();
  Data d;
  d.x = cpu_values(shape, seed, dtype, -1.5, 2.5);
  d.weight = cpu_values({c}, seed + 2, DType::F32, -1.5, 1.5);  // negative scales too
  d.bias = cpu_values({c}, seed + 3, DType::F32, -0.5, 0.5);
  d.running_mean = cpu_values({c}, seed + 4, DType::F32, -0.2, 0.2);
  d.running_var = cpu_values({c}, seed + 5, DType::F32, 0.5, 2.0);
  return d;
}

Tensor gpu(const Tensor& cpu, DType dtype = DType::F32) { return cpu.to(dtype).to(Device::gpu(0)); }

std::vector<char> bytes_of(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  const char* p = static_cast<const char*>(host.data_ptr());
  return std::vector<char>(p, p + host.nbytes());
}

struct Outputs {
  std::vector<std::vector<char>> bytes;  // y, workspace, mask, mean, invstd, running stats
};

Outputs fused_run(const Data& d, DType dtype, const Pool2dParams& p) {
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormReluPoolForward f = ops::batch_norm_relu_max_pool_train(
      gpu(d.x, dtype), gpu(d.weight), gpu(d.bias), rm, rv, kMomentum, kEps, p);
  return {{bytes_of(f.y), bytes_of(f.workspace), bytes_of(f.mask), bytes_of(f.mean),
           bytes_of(f.invstd), bytes_of(rm), bytes_of(rv)}};
}

class GpuBatchNormReluMaxPool : public ::testing::TestWithParam<std::tuple<PoolCase, DType>> {};

TEST_P(GpuBatchNormReluMaxPool, IsBitIdenticalToTheOpsItReplaces) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [pc, dtype] = GetParam();
  const Data d = make_data(pc.shape, dtype, 11);
  const Outputs fused = fused_run(d, dtype, pc.pool);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormForward bn = ops::batch_norm_relu_train(
      gpu(d.x, dtype), Tensor(), gpu(d.weight), gpu(d.bias), rm, rv, kMomentum, kEps);
  const ops::MaxPoolForward pooled = ops::max_pool2d(bn.y, pc.pool);
  const std::vector<std::vector<char>> want = {bytes_of(pooled.y),  bytes_of(pooled.workspace),
                                               bytes_of(bn.mask),   bytes_of(bn.mean),
                                               bytes_of(bn.invstd), bytes_of(rm),
                                               bytes_of(rv)};
  const char* names[] = {"y",      "arg-max record", "mask",       "mean",
                         "invstd", "running_mean",   "running_var"};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(fused.bytes[i] == want[i]) << names[i] << " differs from the unfused ops'";
}

// The backward (one pass gathering the pooled gradient where the forward's kernel covers the
// input) against max_pool2d_backward then batch_norm_relu_backward, from the same forward.
TEST_P(GpuBatchNormReluMaxPool, BackwardIsBitIdenticalToTheOpsItReplaces) {
  HG_REQUIRE_GPU();
  const PoisonGuard poison;
  const auto& [pc, dtype] = GetParam();
  const Data d = make_data(pc.shape, dtype, 51);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const Tensor x = gpu(d.x, dtype), w = gpu(d.weight);
  const ops::BatchNormReluPoolForward f =
      ops::batch_norm_relu_max_pool_train(x, w, gpu(d.bias), rm, rv, kMomentum, kEps, pc.pool);
  const Tensor dy = gpu(cpu_values(f.y.shape(), 52, dtype, -1.0, 1.0), dtype);
  const Tensor dy2 = gpu(cpu_values(f.y.shape(), 53, dtype, -1.0, 1.0), dtype);
  // The pooled gradient in one part, and in two (summed while gathering against an add first).
  for (const bool two_parts : {false, true}) {
    SCOPED_TRACE(two_parts ? "two parts" : "one part");
    const ops::BatchNormGrads fused = ops::batch_norm_relu_max_pool_backward(
        dy, f.workspace, f.mask, x, w, f.mean, f.invstd, pc.pool, two_parts ? dy2 : Tensor());
    const Tensor dz =
        ops::max_pool2d_backward(two_parts ? ops::add(dy, dy2) : dy, x, f.workspace, pc.pool);
    const ops::BatchNormReluGrads plain =
        ops::batch_norm_relu_backward(dz, f.mask, x, w, f.mean, f.invstd, ResidualGrad::Skip);
    EXPECT_TRUE(bytes_of(fused.dx) == bytes_of(plain.dx)) << "dx";
    EXPECT_TRUE(bytes_of(fused.dweight) == bytes_of(plain.dweight)) << "dweight";
    EXPECT_TRUE(bytes_of(fused.dbias) == bytes_of(plain.dbias)) << "dbias";
    const std::vector<double> dw = test::to_doubles(fused.dweight);
    for (double v : dw) ASSERT_TRUE(std::isfinite(v));
    EXPECT_GT(*std::max_element(dw.begin(), dw.end()), 0.0) << "no gradient reached the weights";
  }
}

TEST_P(GpuBatchNormReluMaxPool, MatchesCpu) {
  HG_REQUIRE_GPU();
  const auto& [pc, dtype] = GetParam();
  const Data d = make_data(pc.shape, dtype, 21);
  Tensor rm_cpu = d.running_mean.clone(), rv_cpu = d.running_var.clone();
  const ops::BatchNormReluPoolForward ref = ops::batch_norm_relu_max_pool_train(
      d.x, d.weight, d.bias, rm_cpu, rv_cpu, kMomentum, kEps, pc.pool);
  Tensor rm = gpu(d.running_mean), rv = gpu(d.running_var);
  const ops::BatchNormReluPoolForward f = ops::batch_norm_relu_max_pool_train(
      gpu(d.x, dtype), gpu(d.weight), gpu(d.bias), rm, rv, kMomentum, kEps, pc.pool);
  ASSERT_EQ(f.y.shape(), ref.y.shape());
  EXPECT_EQ(f.y.dtype(), dtype);
  // One rounding of each output after f32 arithmetic (the pooling picks one of the values).
  const std::vector<double> r = test::to_doubles(ref.y);
  double scale = 1e-30;
  for (double v : r) scale = std::max(scale, std::abs(v));
  const double bound = dtype == DType::F32 ? 1e-5 : 1e-2;
  EXPECT_TRUE(test::all_close(f.y, r, test::Tolerance{0.0, bound * scale, -1.0})) << "y";
  const test::Tolerance stats{1e-5, 1e-6, -1.0};
  EXPECT_TRUE(test::all_close(f.mean, test::to_doubles(ref.mean), stats)) << "mean";
  EXPECT_TRUE(test::all_close(f.invstd, test::to_doubles(ref.invstd), stats)) << "invstd";
  EXPECT_TRUE(test::all_close(rm, test::to_doubles(rm_cpu), stats)) << "running_mean";
  EXPECT_TRUE(test::all_close(rv, test::to_doubles(rv_cpu), stats)) << "running_var";
}

TEST_P(GpuBatchNormReluMaxPool, RepeatedRunsAreBitIdentical) {
  HG_REQUIRE_GPU();
  const auto& [pc, dtype] = GetParam();
  const Data d = make_data(pc.shape, dtype, 41);
  const Outputs a = fused_run(d, dtype, pc.pool), b = fused_run(d, dtype, pc.pool);
  EXPECT_TRUE(a.bytes == b.bytes);
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuBatchNormReluMaxPool,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::ValuesIn(kDtypes)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace hg
