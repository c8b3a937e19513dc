// Elementwise ops on the CPU, for f32, f64 and bf16 (widened to float, each result rounded once,
// as on GPUs). The op bodies (ops/op_list.h) have checked shapes,
// dtypes and devices and made the inputs contiguous, so every kernel is a flat loop over numel
// elements applying a functor of backend/elementwise_functors.h, the formulas the GPU kernels
// apply too. The functors are branch-free (selects become blends) so the loops vectorise;
// in-place ops are safe because element i is read before it is written and nothing else
// touches it.
#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/backend/elementwise_functors.h"
#include "hourglass/base/parallel.h"

namespace hg {

using cpu::compute_t;
using cpu::dispatch_storage;
using cpu::narrow;
using cpu::widen;

namespace {

// Elements per parallel chunk. These loops move a few bytes per flop, so a chunk must be large
// enough (~128 KiB of f32) that waking a thread pays for itself; smaller tensors run inline.
constexpr int64_t kElementwiseGrain = int64_t(1) << 15;

// out[i] = f(a[i], b[i]); out may equal a (in-place ops). T is the storage type, f computes in
// compute_t<T>. The pointers and the functor are captured by value: through references the
// loop reloads them after every store (which might alias them) and does not vectorise.
template <typename T, typename F>
void binary_loop(const T* a, const T* b, T* out, int64_t n, F f) {
  parallel_for_inline(n, kElementwiseGrain, [a, b, out, f](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = narrow<T>(f(widen(a[i]), widen(b[i])));
  });
}

// out[i] = f(a[i]); out may equal a (in-place ops).
template <typename T, typename F>
void unary_loop(const T* a, T* out, int64_t n, F f) {
  parallel_for_inline(n, kElementwiseGrain, [a, out, f](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = narrow<T>(f(widen(a[i])));
  });
}

// A new tensor holding F(a[i], b[i]).
template <template <typename> class F>
Tensor binary(const char* op, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_storage(op, a, [&]<typename T>() {
    binary_loop<T>(a.data<T>(), b.data<T>(), out.data<T>(), a.numel(), F<compute_t<T>>{});
  });
  return out;
}

// A new tensor holding F{scalar...}(a[i]): the scalar, when there is one, rounded to the
// compute type once.
template <template <typename> class F, typename... Scalar>
Tensor unary(const char* op, const Tensor& a, Scalar... s) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_storage(op, a, [&]<typename T>() {
    using C = compute_t<T>;
    unary_loop<T>(a.data<T>(), out.data<T>(), a.numel(), F<C>{C(s)...});
  });
  return out;
}

}  // namespace

// The ops of the functor table (elementwise_functors.h).
#define HG_CPU_UNARY(name, F) \
  Tensor CpuBackend::name(const Tensor& x) { return unary<elementwise::F>(#name, x); }
#define HG_CPU_SCALAR(name, F) \
  Tensor CpuBackend::name(const Tensor& x, double s) { return unary<elementwise::F>(#name, x, s); }
#define HG_CPU_BINARY(name, F)                                \
  Tensor CpuBackend::name(const Tensor& a, const Tensor& b) { \
    return binary<elementwise::F>(#name, a, b);               \
  }
HG_ELEMENTWISE_OPS(HG_CPU_UNARY, HG_CPU_SCALAR, HG_CPU_BINARY)
#undef HG_CPU_UNARY
#undef HG_CPU_SCALAR
#undef HG_CPU_BINARY

void CpuBackend::add_(Tensor& dst, const Tensor& src, double alpha) {
  dispatch_storage("add_", dst, [&]<typename T>() {
    using C = compute_t<T>;
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    const int64_t n = dst.numel();
    if (alpha == 1.0)  // the common case (gradient accumulation): skip the multiply
      binary_loop<T>(d, s, d, n, elementwise::Add<C>{});
    else
      binary_loop<T>(d, s, d, n, elementwise::AddScaled<C>{C(alpha)});
  });
}

// A bf16 source added into an f32 destination (a gradient of a parameter's bf16 copy into the
// parameter's f32 gradient) is widened while it is read; other mixed pairs convert first.
void CpuBackend::accumulate_(const std::vector<Tensor>& dsts, const std::vector<Tensor>& srcs) {
  for (size_t i = 0; i < dsts.size(); ++i) {
    Tensor dst = dsts[i];
    const Tensor& src = srcs[i];
    if (dst.dtype() == DType::F32 && src.dtype() == DType::BF16) {
      float* d = dst.data<float>();
      const Bf16* s = src.data<Bf16>();
      parallel_for_inline(dst.numel(), kElementwiseGrain, [d, s](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) d[j] += widen(s[j]);
      });
      continue;
    }
    add_(dst, src.dtype() == dst.dtype() ? src : src.to(dst.dtype()), 1.0);
  }
}

void CpuBackend::mul_scalar_(Tensor& dst, double s) {
  dispatch_storage("mul_scalar_", dst, [&]<typename T>() {
    using C = compute_t<T>;
    unary_loop<T>(dst.data<T>(), dst.data<T>(), dst.numel(), elementwise::MulScalar<C>{C(s)});
  });
}

}  // namespace hg
