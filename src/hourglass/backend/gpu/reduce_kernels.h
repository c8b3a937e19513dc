// Launchers of the full reductions (reduce_kernels.cu), called by reduce.cpp.
#pragma once

#include <cstdint>

#include "hourglass/backend/reduction_functors.h"
#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// One per line of HG_REDUCTION_OPS (backend/reduction_functors.h), named as its op.
#define HG_REDUCE_OP_ENUM(name, Functor) name,
enum class ReduceOp : uint8_t { HG_REDUCTION_OPS(HG_REDUCE_OP_ENUM) };
#undef HG_REDUCE_OP_ENUM

// How many f32 partial sums launch_reduce needs in `partials` for n elements (0 when the
// reduction fits one block and needs none). Depends on n only, never on the device, so the
// order of additions, hence the result, is the same on every GPU and every run.
int64_t reduce_partials(int64_t n);

// out[0] = the reduction `op` of the n contiguous elements of x (f32, bf16 or f16), in float by
// a fixed tree; `partials` is device scratch of reduce_partials(n) floats (may be null when
// that is 0). n = 0 writes the functor's identity. Two kernels at most; nothing is read back.
void launch_reduce(ReduceOp op, const void* x, int64_t n, DType dtype, float* partials, float* out,
                   gpuStream_t stream);

}  // namespace hg::gpu
