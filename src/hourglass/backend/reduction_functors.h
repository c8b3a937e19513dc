// The full reductions (a tensor to one value), written once for both backends, as
// elementwise_functors.h does for per-element ops: each is a struct template on the type it
// accumulates in (double on the CPU, float on the GPU) with identity(), map(x) (an element's
// contribution) and combine(a, b) (two partial results; commutative, so that a tree of them
// gives the same bits in either order of its operands). The CPU method (backend/cpu/reduce.cpp),
// the GPU method (backend/gpu/reduce.cpp) and the GPU launcher's dispatch
// (backend/gpu/reduce_kernels.cu) are expanded from the table HG_REDUCTION_OPS, whose lines
// name the op and its functor; each backend fixes the order of the combinations by the size
// alone (the results do not depend on the thread count).
//
// Compiled by g++, nvcc and hipcc: includes nothing but elementwise_functors.h (HG_HOST_DEVICE,
// <cmath>).
#pragma once

#include "hourglass/backend/elementwise_functors.h"

namespace hg::reduction {

template <typename T>
struct SumOf {
  HG_HOST_DEVICE T identity() const { return T(0); }
  HG_HOST_DEVICE T map(T x) const { return x; }
  HG_HOST_DEVICE T combine(T a, T b) const { return a + b; }
};

template <typename T>
struct SumOfSquares {
  HG_HOST_DEVICE T identity() const { return T(0); }
  HG_HOST_DEVICE T map(T x) const { return x * x; }
  HG_HOST_DEVICE T combine(T a, T b) const { return a + b; }
};

// The largest |x|; NaN when any element is NaN (a comparison with NaN is false, so the select
// keeps the NaN whichever operand holds it).
template <typename T>
struct MaxAbs {
  HG_HOST_DEVICE T identity() const { return T(0); }
  HG_HOST_DEVICE T map(T x) const { return x < T(0) ? -x : x; }
  HG_HOST_DEVICE T combine(T a, T b) const { return (a > b || a != a) ? a : b; }
};

}  // namespace hg::reduction

// REDUCE(op name, functor): the op `Tensor name(const Tensor&)` of op_list.h, a one-element f32
// tensor on the input's device.
#define HG_REDUCTION_OPS(REDUCE)    \
  REDUCE(sum, SumOf)                \
  REDUCE(sum_squares, SumOfSquares) \
  REDUCE(amax, MaxAbs)
