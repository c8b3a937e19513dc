// Full reductions to a scalar on the CPU (f32 or f64 input, f32 result), accumulated in double:
// the methods of the table HG_REDUCTION_OPS (backend/reduction_functors.h).
//
// Determinism: the input is cut into fixed blocks of kBlock elements whatever the thread count;
// each block's partial sum is computed with a fixed lane structure and the partials are added in
// block order. So the same input gives bit-identical results on 1 or 64 threads, and a resumed
// run reproduces the gradient norm it would have computed without the interruption.
#include <array>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/reduction_functors.h"
#include "hourglass/base/parallel.h"

namespace hg {

namespace {

constexpr int64_t kBlock = int64_t(1) << 13;  // elements per partial sum
constexpr int64_t kLanes = 8;                 // independent accumulators (lets it vectorise)

// The reduction r of x[0, n) in double with kLanes interleaved accumulators, combined in lane
// order: the order of combinations is fixed by n alone.
template <typename T, typename R>
double block_reduce(const T* x, int64_t n, R r) {
  std::array<double, kLanes> acc;
  acc.fill(r.identity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      acc[size_t(l)] = r.combine(acc[size_t(l)], r.map(double(x[i + l])));
  for (; i < n; ++i)
    acc[size_t(i % kLanes)] = r.combine(acc[size_t(i % kLanes)], r.map(double(x[i])));
  double s = r.identity();
  for (double a : acc) s = r.combine(s, a);
  return s;
}

template <typename T, typename R>
double reduce(const T* x, int64_t n, R r) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(size_t(blocks), r.identity());
  // Four blocks (32k elements) per thread at least: below that the fork costs more.
  parallel_for_inline(blocks, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kBlock;
      partial[size_t(b)] = block_reduce(x + begin, std::min(kBlock, n - begin), r);
    }
  });
  double total = r.identity();
  for (double p : partial) total = r.combine(total, p);
  return total;
}

template <typename R>
Tensor reduce_to_scalar(const char* op, const Tensor& x, R r) {
  double total = 0;
  switch (x.dtype()) {
    case DType::F32: total = reduce(x.data<float>(), x.numel(), r); break;
    case DType::F64: total = reduce(x.data<double>(), x.numel(), r); break;
    default:
      throw_invalid(fmt::format("cpu {}: supports f32 and f64, got {}", op, x.describe()),
                    "convert the tensor with .to(DType::F32) first");
  }
  return Tensor::scalar(total, DType::F32, x.device());
}

}  // namespace

#define HG_CPU_REDUCTION(name, Functor)                              \
  Tensor CpuBackend::name(const Tensor& x) {                         \
    return reduce_to_scalar(#name, x, reduction::Functor<double>{}); \
  }
HG_REDUCTION_OPS(HG_CPU_REDUCTION)
#undef HG_CPU_REDUCTION

}  // namespace hg
