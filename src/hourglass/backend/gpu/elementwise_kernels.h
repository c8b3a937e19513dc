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

// Up to kAccumulateTensors pairs (dst f32, src of one dtype, numel elements each) for
// launch_accumulate: passed by value as the kernel's argument (under 4 KB).
inline constexpr int kAccumulateTensors = 64;
struct AccumulateTable {
  float* dst[kAccumulateTensors];
  const void* src[kAccumulateTensors];
  int64_t numel[kAccumulateTensors];
  int count = 0;
};

// dst[i][e] += float(src[i][e]) for every pair of the table (one f32 rounding each, as add_),
// in one launch. `source` is the dtype of every src (f32, bf16 or f16).
void launch_accumulate(const AccumulateTable& table, DType source, gpuStream_t stream);

}  // namespace hg::gpu
