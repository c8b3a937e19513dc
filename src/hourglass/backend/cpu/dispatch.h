// Dtype dispatch for the CPU loop kernels.
//
// Two kinds of kernel: those that compute in the element type itself (f32, f64:
// dispatch_float), and those that also take bf16 tensors (dispatch_storage), which read each
// element widened to its compute type (compute_t: float for bf16) and round each result to the
// storage type once (narrow), as the GPU kernels do. For f32 and f64, widen and narrow are the
// identity, so one loop serves all three.
#pragma once

#include "hourglass/base/half.h"
#include "hourglass/tensor/tensor.h"

namespace hg::cpu {

// Calls body.template operator()<T>() with T the C++ type of t's dtype (f32 or f64); other
// dtypes are an InvalidInput error naming the op and the tensor.
template <typename Body>
decltype(auto) dispatch_float(const char* op, const Tensor& t, Body&& body) {
  switch (t.dtype()) {
    case DType::F32: return body.template operator()<float>();
    case DType::F64: return body.template operator()<double>();
    default:
      throw_invalid(fmt::format("cpu {}: supports f32 and f64, got {}", op, t.describe()),
                    "convert the tensor with .to(DType::F32) first");
  }
}

// As dispatch_float, with T = Bf16 for bf16 tensors too.
template <typename Body>
decltype(auto) dispatch_storage(const char* op, const Tensor& t, Body&& body) {
  switch (t.dtype()) {
    case DType::F32: return body.template operator()<float>();
    case DType::F64: return body.template operator()<double>();
    case DType::BF16: return body.template operator()<Bf16>();
    default:
      throw_invalid(fmt::format("cpu {}: supports f32, f64 and bf16, got {}", op, t.describe()),
                    "convert the tensor with .to(DType::F32) first");
  }
}

// The type a kernel computes in for storage type T.
template <typename T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<Bf16> {
  using type = float;
};
template <typename T>
using compute_t = typename compute_type<T>::type;

inline float widen(float v) { return v; }
inline double widen(double v) { return v; }
using hg::widen;

// A computed value stored as T: rounded to nearest even for bf16, as is for f32 and f64.
template <typename T>
inline T narrow(compute_t<T> v) {
  if constexpr (std::is_same_v<T, Bf16>)
    return round_to_bf16(v);
  else
    return v;
}

}  // namespace hg::cpu
