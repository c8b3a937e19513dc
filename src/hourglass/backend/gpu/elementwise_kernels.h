// Launchers of the elementwise kernels (elementwise_kernels.cu), called by elementwise.cpp.
// Pointers are device pointers to n contiguous elements of `dtype` (f32, bf16 or f16); values
// are computed in float and rounded once to the dtype. Outputs may alias inputs (in-place ops).
// Nothing is launched when n is 0.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

enum class BinaryOp : uint8_t {
  Add,            // a + b
  Sub,            // a - b
  Mul,            // a * b
  AddScaled,      // a + alpha * b  (add_ with alpha != 1)
  ReluBackward,   // b > 0 ? a : 0  (a = dy, b = y)
};

enum class UnaryOp : uint8_t {
  AddScalar,   // a + s
  MulScalar,   // a * s
  Relu,        // a < 0 ? 0 : a  (NaN passes through)
};

// out[i] = op(a[i], b[i]); `alpha` is used by AddScaled only.
void launch_binary(BinaryOp op, const void* a, const void* b, void* out, int64_t n, float alpha,
                   DType dtype, gpuStream_t stream);

// out[i] = op(a[i]); `s` is the scalar of AddScalar / MulScalar.
void launch_unary(UnaryOp op, const void* a, void* out, int64_t n, float s, DType dtype,
                  gpuStream_t stream);

}  // namespace hg::gpu
