// Full reductions to a scalar on the CPU (f32 or f64 input, f32 result), accumulated in double.
//
// Determinism: the input is cut into fixed blocks of kBlock elements whatever the thread count;
// each block's partial sum is computed with a fixed lane structure and the partials are added in
// block order. So the same input gives bit-identical results on 1 or 64 threads, and a resumed
// run reproduces the gradient norm it would have computed without the interruption.
#include <array>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/base/parallel.h"

namespace hg {

namespace {

constexpr int64_t kBlock = int64_t(1) << 13;  // elements per partial sum
constexpr int64_t kLanes = 8;                 // independent accumulators (lets it vectorise)

// Sum of f(x[i]) over [0, n) in double with kLanes interleaved accumulators, combined in lane
// order: the order of additions is fixed by n alone.
template <typename T, typename F>
double block_sum(const T* x, int64_t n, F f) {
  std::array<double, kLanes> acc{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[size_t(l)] += f(double(x[i + l]));
  for (; i < n; ++i) acc[size_t(i % kLanes)] += f(double(x[i]));
  double s = 0;
  for (double a : acc) s += a;
  return s;
}

template <typename T, typename F>
double reduce(const T* x, int64_t n, F f) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), 0.0);
  // Four blocks (32k elements) per thread at least: below that the fork costs more.
  parallel_for_inline(blocks, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kBlock;
      partial[size_t(b)] = block_sum(x + begin, std::min(kBlock, n - begin), f);
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

template <typename F>
Tensor reduce_to_scalar(const char* op, const Tensor& x, F f) {
  double total = 0;
  switch (x.dtype()) {
    case DType::F32: total = reduce(x.data<float>(), x.numel(), f); break;
    case DType::F64: total = reduce(x.data<double>(), x.numel(), f); break;
    default:
      throw_invalid(fmt::format("cpu {}: supports f32 and f64, got {}", op, x.describe()),
                    "convert the tensor with .to(DType::F32) first");
  }
  return Tensor::scalar(total, DType::F32, x.device());
}

}  // namespace

Tensor CpuBackend::sum(const Tensor& x) {
  return reduce_to_scalar("sum", x, [](double v) { return v; });
}

Tensor CpuBackend::sum_squares(const Tensor& x) {
  return reduce_to_scalar("sum_squares", x, [](double v) { return v * v; });
}

}  // namespace hg
