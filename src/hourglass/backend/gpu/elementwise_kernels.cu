// Elementwise kernels: one grid-stride loop per op over 16-byte packs (4 f32 or 8 bf16/f16 per
// thread per iteration) when every pointer is 16-byte aligned, one element at a time otherwise;
// the last n % pack elements (fewer than a pack) are done by the first threads after the loop.
// Arithmetic is in float, by the functors of backend/elementwise_functors.h (the CPU kernels'
// formulas); each result is rounded once to the element type.
#include <cstdint>

#include "hourglass/backend/elementwise_functors.h"
#include "hourglass/backend/gpu/elementwise_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

// Elements per 16-byte pack.
template <typename T>
inline constexpr int kPack = int(16 / sizeof(T));

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
  const int64_t t = packs * V + tid;  // the tail: fewer than V elements
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

// launch_accumulate's kernel: block b adds chunk b - first_block[i] of pair i, the pair found
// by a binary search over the table (which the kernel reads from its parameter space).
constexpr int kAccumulateThreads = 256;
constexpr int64_t kAccumulateChunk = 8 * kAccumulateThreads;
struct AccumulateLaunch {
  AccumulateTable table;
  int64_t first_block[kAccumulateTensors + 1];
};

template <typename S>
__global__ void __launch_bounds__(kAccumulateThreads) accumulate_kernel(const AccumulateLaunch t) {
  const int64_t b = blockIdx.x;
  int lo = 0, hi = t.table.count;  // first_block[lo] <= b < first_block[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (t.first_block[mid] <= b)
      lo = mid;
    else
      hi = mid;
  }
  const int64_t start = (b - t.first_block[lo]) * kAccumulateChunk;
  const int64_t end =
      start + kAccumulateChunk < t.table.numel[lo] ? start + kAccumulateChunk : t.table.numel[lo];
  float* d = t.table.dst[lo];
  const S* s = static_cast<const S*>(t.table.src[lo]);
  for (int64_t e = start + threadIdx.x; e < end; e += kAccumulateThreads)
    d[e] = d[e] + to_float(s[e]);
}

}  // namespace

void launch_accumulate(const AccumulateTable& table, DType source, gpuStream_t stream) {
  AccumulateLaunch launch;
  launch.table = table;
  int64_t blocks = 0;
  for (int i = 0; i < table.count; ++i) {
    launch.first_block[i] = blocks;
    blocks += (table.numel[i] + kAccumulateChunk - 1) / kAccumulateChunk;
  }
  launch.first_block[table.count] = blocks;
  if (blocks == 0) return;
  dispatch_float("accumulate_", source, [&]<typename T>() {
    accumulate_kernel<T><<<unsigned(blocks), kAccumulateThreads, 0, stream>>>(launch);
  });
  HG_GPU_CHECK_LAUNCH();
}

template <typename F>
void launch_binary(F f, const void* a, const void* b, void* out, int64_t n, DType dtype,
                   gpuStream_t stream) {
  if (n <= 0) return;
  dispatch_float("elementwise", dtype, [&]<typename T>() { binary<T>(a, b, out, n, f, stream); });
}

template <typename F>
void launch_unary(F f, const void* a, void* out, int64_t n, DType dtype, gpuStream_t stream) {
  if (n <= 0) return;
  dispatch_float("elementwise", dtype, [&]<typename T>() { unary<T>(a, out, n, f, stream); });
}

// The launchers of every functor of the table, and of AddScaled (add_ with alpha != 1).
#define HG_GPU_UNARY(name, F)                                                           \
  template void launch_unary(elementwise::F<float>, const void*, void*, int64_t, DType, \
                             gpuStream_t);
#define HG_GPU_BINARY(name, F)                                                                 \
  template void launch_binary(elementwise::F<float>, const void*, const void*, void*, int64_t, \
                              DType, gpuStream_t);
HG_ELEMENTWISE_OPS(HG_GPU_UNARY, HG_GPU_UNARY, HG_GPU_BINARY)
HG_GPU_BINARY(add_, AddScaled)

}  // namespace hg::gpu
