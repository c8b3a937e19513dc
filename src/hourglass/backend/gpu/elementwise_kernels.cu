// Elementwise kernels: one grid-stride loop per op over 16-byte packs (4 f32 or 8 bf16/f16 per
// thread per iteration) when every pointer is 16-byte aligned, one element at a time otherwise;
// the last n % pack elements (fewer than a pack) are done by the first threads after the loop.
// Arithmetic is in float; each result is rounded once to the element type.
#include <cstdint>

#include "hourglass/backend/gpu/elementwise_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

// Elements per 16-byte pack.
template <typename T>
inline constexpr int kPack = int(16 / sizeof(T));

struct AddOp {
  __device__ float operator()(float x, float y) const { return x + y; }
};
struct SubOp {
  __device__ float operator()(float x, float y) const { return x - y; }
};
struct MulOp {
  __device__ float operator()(float x, float y) const { return x * y; }
};
struct AddScaledOp {
  float alpha;
  __device__ float operator()(float x, float y) const { return x + alpha * y; }
};
struct ReluBackwardOp {
  __device__ float operator()(float g, float y) const { return y > 0.0f ? g : 0.0f; }
};
struct AddScalarOp {
  float s;
  __device__ float operator()(float x) const { return x + s; }
};
struct MulScalarOp {
  float s;
  __device__ float operator()(float x) const { return x * s; }
};
struct ReluOp {
  // `x < 0 ? 0 : x`, as the CPU: a NaN passes through, so divergence stays visible.
  __device__ float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};

// No __restrict__: out may alias a (in-place ops); each element is read before it is written
// by the same thread.
template <typename T, int V, typename Op>
__global__ void __launch_bounds__(kThreads)
    binary_kernel(const T* a, const T* b, T* out, int64_t n, Op op) {
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  using P = Pack<T, V>;
  for (int64_t i = tid; i < packs; i += stride) {
    const P pa = reinterpret_cast<const P*>(a)[i];
    const P pb = reinterpret_cast<const P*>(b)[i];
    P po;
#pragma unroll
    for (int k = 0; k < V; ++k) po.v[k] = from_float<T>(op(to_float(pa.v[k]), to_float(pb.v[k])));
    reinterpret_cast<P*>(out)[i] = po;
  }
  const int64_t t = packs * V + tid;   // the tail: fewer than V elements
  if (t < n) out[t] = from_float<T>(op(to_float(a[t]), to_float(b[t])));
}

template <typename T, int V, typename Op>
__global__ void __launch_bounds__(kThreads) unary_kernel(const T* a, T* out, int64_t n, Op op) {
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  using P = Pack<T, V>;
  for (int64_t i = tid; i < packs; i += stride) {
    const P pa = reinterpret_cast<const P*>(a)[i];
    P po;
#pragma unroll
    for (int k = 0; k < V; ++k) po.v[k] = from_float<T>(op(to_float(pa.v[k])));
    reinterpret_cast<P*>(out)[i] = po;
  }
  const int64_t t = packs * V + tid;
  if (t < n) out[t] = from_float<T>(op(to_float(a[t])));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Threads for a loop over `packs` packs plus a tail of up to one pack.
unsigned blocks_for(int64_t packs) { return grid_for(packs > 0 ? packs : 1, kThreads); }

template <typename T, typename Op>
void binary(const void* a0, const void* b0, void* out0, int64_t n, Op op, gpuStream_t stream) {
  const T* a = static_cast<const T*>(a0);
  const T* b = static_cast<const T*>(b0);
  T* out = static_cast<T*>(out0);
  constexpr int V = kPack<T>;
  if (aligned16(a) && aligned16(b) && aligned16(out)) {
    binary_kernel<T, V><<<blocks_for(n / V), kThreads, 0, stream>>>(a, b, out, n, op);
  } else {
    binary_kernel<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n, op);
  }
  HG_GPU_CHECK_LAUNCH();
}

template <typename T, typename Op>
void unary(const void* a0, void* out0, int64_t n, Op op, gpuStream_t stream) {
  const T* a = static_cast<const T*>(a0);
  T* out = static_cast<T*>(out0);
  constexpr int V = kPack<T>;
  if (aligned16(a) && aligned16(out)) {
    unary_kernel<T, V><<<blocks_for(n / V), kThreads, 0, stream>>>(a, out, n, op);
  } else {
    unary_kernel<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(a, out, n, op);
  }
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace

void launch_binary(BinaryOp op, const void* a, const void* b, void* out, int64_t n, float alpha,
                   DType dtype, gpuStream_t stream) {
  if (n <= 0) return;
  dispatch_float("elementwise", dtype, [&]<typename T>() {
    switch (op) {
      case BinaryOp::Add: binary<T>(a, b, out, n, AddOp{}, stream); break;
      case BinaryOp::Sub: binary<T>(a, b, out, n, SubOp{}, stream); break;
      case BinaryOp::Mul: binary<T>(a, b, out, n, MulOp{}, stream); break;
      case BinaryOp::AddScaled: binary<T>(a, b, out, n, AddScaledOp{alpha}, stream); break;
      case BinaryOp::ReluBackward: binary<T>(a, b, out, n, ReluBackwardOp{}, stream); break;
    }
  });
}

void launch_unary(UnaryOp op, const void* a, void* out, int64_t n, float s, DType dtype,
                  gpuStream_t stream) {
  if (n <= 0) return;
  dispatch_float("elementwise", dtype, [&]<typename T>() {
    switch (op) {
      case UnaryOp::AddScalar: unary<T>(a, out, n, AddScalarOp{s}, stream); break;
      case UnaryOp::MulScalar: unary<T>(a, out, n, MulScalarOp{s}, stream); break;
      case UnaryOp::Relu: unary<T>(a, out, n, ReluOp{}, stream); break;
    }
  });
}

}  // namespace hg::gpu
