// Elementwise ops on the CPU, for f32 and f64. ops.cpp has already checked shapes, dtypes and
// devices and made the inputs contiguous, so every kernel is a flat loop over numel elements.
// The loop bodies are branch-free (selects become blends) so the compiler vectorises them; in-place
// ops are safe because element i is read before it is written and nothing else touches it.
#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/base/parallel.h"

namespace hg {

using cpu::dispatch_float;

namespace {

// Elements per parallel chunk. These loops move a few bytes per flop, so a chunk must be large
// enough (~128 KiB of f32) that waking a thread pays for itself; smaller tensors run inline.
constexpr int64_t kGrain = int64_t(1) << 15;


// out[i] = f(a[i], b[i])
template <typename T, typename F>
void binary_loop(const T* a, const T* b, T* out, int64_t n, F f) {
  parallel_for_inline(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
  });
}

// out[i] = f(a[i]); out may equal a (in-place ops).
template <typename T, typename F>
void unary_loop(const T* a, T* out, int64_t n, F f) {
  parallel_for_inline(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(a[i]);
  });
}

template <typename F>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, F f) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_float(op, a, [&]<typename T>() {
    binary_loop<T>(a.data<T>(), b.data<T>(), out.data<T>(), a.numel(), f);
  });
  return out;
}

// f receives (value, scalar converted to T).
template <typename F>
Tensor unary_scalar(const char* op, const Tensor& a, double s, F f) {
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  dispatch_float(op, a, [&]<typename T>() {
    const T st = T(s);
    unary_loop<T>(a.data<T>(), out.data<T>(), a.numel(), [&](T v) { return f(v, st); });
  });
  return out;
}

}  // namespace

Tensor CpuBackend::add(const Tensor& a, const Tensor& b) {
  return binary("add", a, b, [](auto x, auto y) { return x + y; });
}

Tensor CpuBackend::sub(const Tensor& a, const Tensor& b) {
  return binary("sub", a, b, [](auto x, auto y) { return x - y; });
}

Tensor CpuBackend::mul(const Tensor& a, const Tensor& b) {
  return binary("mul", a, b, [](auto x, auto y) { return x * y; });
}

Tensor CpuBackend::add_scalar(const Tensor& a, double s) {
  return unary_scalar("add_scalar", a, s, [](auto x, auto c) { return x + c; });
}

Tensor CpuBackend::mul_scalar(const Tensor& a, double s) {
  return unary_scalar("mul_scalar", a, s, [](auto x, auto c) { return x * c; });
}

void CpuBackend::add_(Tensor& dst, const Tensor& src, double alpha) {
  dispatch_float("add_", dst, [&]<typename T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    const int64_t n = dst.numel();
    if (alpha == 1.0) {   // the common case (gradient accumulation): skip the multiply
      binary_loop<T>(d, s, d, n, [](T x, T y) { return x + y; });
    } else {
      const T a = T(alpha);
      binary_loop<T>(d, s, d, n, [a](T x, T y) { return x + a * y; });
    }
  });
}

void CpuBackend::mul_scalar_(Tensor& dst, double s) {
  dispatch_float("mul_scalar_", dst, [&]<typename T>() {
    const T c = T(s);
    unary_loop<T>(dst.data<T>(), dst.data<T>(), dst.numel(), [c](T x) { return x * c; });
  });
}

Tensor CpuBackend::relu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float("relu", x, [&]<typename T>() {
    // `v < 0 ? 0 : v` rather than max(v, 0): a NaN passes through, so divergence stays visible.
    unary_loop<T>(x.data<T>(), out.data<T>(), x.numel(), [](T v) { return v < T(0) ? T(0) : v; });
  });
  return out;
}

Tensor CpuBackend::relu_backward(const Tensor& dy, const Tensor& y) {
  return binary("relu_backward", dy, y, [](auto g, auto v) {
    using T = decltype(g);
    return v > T(0) ? g : T(0);
  });
}

}  // namespace hg
