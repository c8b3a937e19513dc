// Dtype dispatch for the CPU loop kernels.
#pragma once

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

}  // namespace hg::cpu
