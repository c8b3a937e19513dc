// Matrix products of the GPU backend behind one vendor-neutral interface: cuBLASLt
// (blas_cublaslt.cpp) on CUDA, hipBLASLt (blas_hipblaslt.cpp) on HIP. Host-side header: no
// vendor type appears here, so linear.cpp is written once.
//
// The library's algorithm is chosen once per shape and cached with the descriptors in a
// per-device map; later calls only set the bias pointer and launch. cuBLASLt: from the tuning
// cache, else the heuristic's first few algorithms timed on the first call's operands (the
// first only, untimed, in deterministic mode); hipBLASLt: the heuristic's first, untimed. One
// library handle per device, created lazily. Every call is checked: a failure throws hg::Error
// naming the call, the status and the product's shape.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hourglass/ops/ops.h"
#include "hourglass/tensor/tensor.h"

namespace hg::gpu {

// How f32 products and convolutions run. bf16 and f16 always use tensor cores with f32
// accumulation and ignore this.
enum class MathMode : uint8_t {
  Exact,  // f32 inputs, f32 FMA arithmetic: no TF32
  Tf32,   // f32 inputs rounded to TF32 (10-bit mantissa) on tensor cores, f32 accumulation
};

// The calling thread's math mode for inputs of `dtype` (ops::allow_tf32()), normalised so that
// bf16/f16 always map to Exact (their descriptors and caches do not depend on the flag).
inline MathMode math_mode_for(DType dtype) {
  return dtype == DType::F32 && ops::allow_tf32() ? MathMode::Tf32 : MathMode::Exact;
}

}  // namespace hg::gpu

namespace hg::gpu::blas {

enum class Transpose : uint8_t { No, Yes };

// Column-major BLAS convention: D[m,n] = op(A)[m,k] * op(B)[k,n] (+ bias[m] added to every
// column), accumulated in f32, D written in full (no accumulation into D).
//  - A is stored column-major with leading dimension lda: [m x k] (lda >= m) when op_a is No,
//    [k x m] (lda >= k) when Yes. Likewise B: [k x n] (No) or [n x k] (Yes), ldb.
//  - D is [m x n] column-major, leading dimension ldd >= m.
//  - a, b, d (and bias when defined: [m], contiguous) are device tensors of one dtype (f32,
//    bf16 or f16) on the same GPU; `d` is written on the device's stream. m, n, k > 0.
// A row-major [r x c] matrix is a column-major [c x r] one with ld = c: linear.cpp maps its
// row-major products onto this by swapping operands.
// Creates the device's handle now rather than at the first product (Backend::prepare).
// Thread-safe.
void prepare(int device);

void matmul(MathMode math, int64_t m, int64_t n, int64_t k, const Tensor& a, Transpose op_a,
            int64_t lda, const Tensor& b, Transpose op_b, int64_t ldb, const Tensor& bias,
            Tensor& d, int64_t ldd);

// What the products' planning did since the process started: algorithms chosen by a search
// (heuristics, timed or not), algorithms timed, algorithms taken from the tuning cache.
struct SearchCounts {
  int64_t searched = 0, timed = 0, from_cache = 0;
};
SearchCounts search_counts();
// Each product planned so far on `device`: the tuning cache's key -> the chosen algorithm as
// the cache spells it (hipBLASLt: nothing; it does not use the cache). For tests.
std::map<std::string, std::string> planned_choices(int device);
// Drops every plan of every device, so the next call of each shape plans again. Tests only: no
// product may be running on another thread.
void forget_plans_for_testing();

// Largest workspace a product may use; allocated per call from the caching allocator.
inline constexpr size_t kMaxWorkspaceBytes = size_t(32) << 20;

}  // namespace hg::gpu::blas
