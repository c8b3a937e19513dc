// Launchers of the elementwise kernels (elementwise_kernels.cu), called by elementwise.cpp.
// `f` is a functor of backend/elementwise_functors.h on float (Add<float>, Relu<float>, ...);
// the .cu instantiates the launchers for every functor of its table and for AddScaled.
// Pointers are device pointers to n contiguous elements of `dtype` (f32, bf16 or f16); values
// are computed in float and rounded once to the dtype. Outputs may alias inputs (in-place ops).
// Nothing is launched when n is 0.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// out[i] = f(a[i], b[i])
template <typename F>
void launch_binary(F f, const void* a, const void* b, void* out, int64_t n, DType dtype,
                   gpuStream_t stream);

// out[i] = f(a[i])
template <typename F>
void launch_unary(F f, const void* a, void* out, int64_t n, DType dtype, gpuStream_t stream);

}  // namespace hg::gpu
