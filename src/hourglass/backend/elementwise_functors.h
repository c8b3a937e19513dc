// The per-element formulas of the element-wise ops, written once for both backends: the CPU
// kernels (backend/cpu/elementwise.cpp) apply them with T = float or double, the GPU kernels
// (backend/gpu/elementwise_kernels.cu) with T = float (16-bit values are widened to float and
// the result rounded once). Each functor is a struct template on the element type whose
// operator() is inline and callable on the host and on the device; a scalar operand is a
// member, converted to T once by the caller.
//
// Compiled by g++, nvcc and hipcc: includes nothing but <cmath>, and never fmt, Tensor or
// anything that includes them. Selects are written `c ? a : b` on values (no branches around
// loads or stores), so the CPU loops vectorise.
#pragma once

#include <cmath>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HG_HOST_DEVICE __host__ __device__
#else
#define HG_HOST_DEVICE
#endif

namespace hg::elementwise {

// sqrt, correctly rounded on both sides: std::sqrt on the host, sqrtf on the device (T is float
// there; CUDA and HIP round sqrtf correctly unless fast math is on, which hourglass never sets).
template <typename T>
HG_HOST_DEVICE inline T square_root(T x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return sqrtf(x);
#else
  return std::sqrt(x);
#endif
}

// tanh of a float on the host, in double arithmetic that the CPU loops vectorise (glibc's tanhf
// is a scalar call, half a policy network's step): below 0.5 the odd Taylor series through x^21
// (the next term is under 1e-9 of the sum); above, 1 - 2 / (e^(2|x|) + 1) with e^y as
// (Taylor series of e^(y/16) through degree 14)^16, |x| capped at 10 (tanh(10) rounds to 1).
// Within one float ulp of tanh over the whole range; NaN stays NaN. Written without branches
// (selects on values), so the CPU loops vectorise it.
inline float tanh_float_host(float xf) {
  const double x = xf, x2 = x * x;
  double p = 18888466084.0 / 194896477400625.0;
  p = p * x2 - 443861162.0 / 1856156927625.0;
  p = p * x2 + 6404582.0 / 10854718875.0;
  p = p * x2 - 929569.0 / 638512875.0;
  p = p * x2 + 21844.0 / 6081075.0;
  p = p * x2 - 1382.0 / 155925.0;
  p = p * x2 + 62.0 / 2835.0;
  p = p * x2 - 17.0 / 315.0;
  p = p * x2 + 2.0 / 15.0;
  p = p * x2 - 1.0 / 3.0;
  p = p * x2 + 1.0;
  const double small = x * p;
  const double a = std::fabs(x);
  const double z = (a > 10.0 ? 10.0 : a) * (2.0 / 16.0);  // NaN stays NaN
  // Horner's form of sum_k z^k / k!, each step 1 + (z / k) * (...), with 1/k exact enough as a
  // double constant (multiplications only, so the loop over elements vectorises).
  double e = 1.0 + z * (1.0 / 14) * 1.0;
  e = 1.0 + z * (1.0 / 13) * e;
  e = 1.0 + z * (1.0 / 12) * e;
  e = 1.0 + z * (1.0 / 11) * e;
  e = 1.0 + z * (1.0 / 10) * e;
  e = 1.0 + z * (1.0 / 9) * e;
  e = 1.0 + z * (1.0 / 8) * e;
  e = 1.0 + z * (1.0 / 7) * e;
  e = 1.0 + z * (1.0 / 6) * e;
  e = 1.0 + z * (1.0 / 5) * e;
  e = 1.0 + z * (1.0 / 4) * e;
  e = 1.0 + z * (1.0 / 3) * e;
  e = 1.0 + z * (1.0 / 2) * e;
  e = 1.0 + z * e;
  e = e * e;
  e = e * e;
  e = e * e;
  e = e * e;
  const double big = 1.0 - 2.0 / (e + 1.0);
  const double t = a < 0.5 ? small : std::copysign(big, x);
  return float(t);
}

// tanh and exp in float on the device (tanhf, expf: within 2 ulp); on the host std:: but for
// tanh of a float (tanh_float_host).
template <typename T>
HG_HOST_DEVICE inline T hyperbolic_tangent(T x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return tanhf(x);
#else
  if constexpr (sizeof(T) == sizeof(float))
    return tanh_float_host(x);
  else
    return std::tanh(x);
#endif
}
template <typename T>
HG_HOST_DEVICE inline T exponential(T x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

// ---- binary: out = f(a, b)

template <typename T>
struct Add {
  HG_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct Sub {
  HG_HOST_DEVICE T operator()(T a, T b) const { return a - b; }
};
template <typename T>
struct Mul {
  HG_HOST_DEVICE T operator()(T a, T b) const { return a * b; }
};
// add_ with alpha != 1: dst + alpha * src.
template <typename T>
struct AddScaled {
  T alpha;
  HG_HOST_DEVICE T operator()(T a, T b) const { return a + alpha * b; }
};
// relu's gradient from its output: dy where y > 0, else 0 (0 at y == 0, PyTorch's convention).
template <typename T>
struct ReluBackward {
  HG_HOST_DEVICE T operator()(T dy, T y) const { return y > T(0) ? dy : T(0); }
};

// sqrt's gradient from its output: dy / (2 y); 2 y is exact, so one rounding.
template <typename T>
struct SqrtBackward {
  HG_HOST_DEVICE T operator()(T dy, T y) const { return dy / (T(2) * y); }
};

// tanh's gradient from its output: dy (1 - y^2).
template <typename T>
struct TanhBackward {
  HG_HOST_DEVICE T operator()(T dy, T y) const { return dy * (T(1) - y * y); }
};

// ---- unary with a scalar: out = f(x; s)

template <typename T>
struct AddScalar {
  T s;
  HG_HOST_DEVICE T operator()(T x) const { return x + s; }
};
template <typename T>
struct MulScalar {
  T s;
  HG_HOST_DEVICE T operator()(T x) const { return x * s; }
};

// ---- unary: out = f(x)

// `x < 0 ? 0 : x` rather than max(x, 0): a NaN passes through, so divergence stays visible.
template <typename T>
struct Relu {
  HG_HOST_DEVICE T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

template <typename T>
struct Sqrt {
  HG_HOST_DEVICE T operator()(T x) const { return square_root(x); }
};

template <typename T>
struct Tanh {
  HG_HOST_DEVICE T operator()(T x) const { return hyperbolic_tangent(x); }
};

template <typename T>
struct Exp {
  HG_HOST_DEVICE T operator()(T x) const { return exponential(x); }
};

}  // namespace hg::elementwise

// The out-of-place element-wise ops of the list (ops/op_list.h) that are one functor each. The
// CPU and GPU backends define their methods for these ops from this table, so such an op needs
// its list entry, its functor above and one line here:
//   UNARY(name, F)   Tensor name(const Tensor& x)                   out[i] = F<T>{}(x[i])
//   SCALAR(name, F)  Tensor name(const Tensor& x, double s)         out[i] = F<T>{T(s)}(x[i])
//   BINARY(name, F)  Tensor name(const Tensor& a, const Tensor& b)  out[i] = F<T>{}(a[i], b[i])
#define HG_ELEMENTWISE_OPS(UNARY, SCALAR, BINARY) \
  BINARY(add, Add)                                \
  BINARY(sub, Sub)                                \
  BINARY(mul, Mul)                                \
  BINARY(relu_backward, ReluBackward)             \
  BINARY(sqrt_backward, SqrtBackward)             \
  BINARY(tanh_backward, TanhBackward)             \
  SCALAR(add_scalar, AddScalar)                   \
  SCALAR(mul_scalar, MulScalar)                   \
  UNARY(relu, Relu)                               \
  UNARY(sqrt, Sqrt)                               \
  UNARY(tanh, Tanh)                               \
  UNARY(exp, Exp)
