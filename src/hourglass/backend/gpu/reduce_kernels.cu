// Full reductions to one f32 value (the functors of backend/reduction_functors.h), deterministic:
// the input is cut into packs of V elements (4 f32 or 8 bf16/f16); thread t of a grid of G blocks
// combines packs t, t + G*T, ... in order, then the tail (fewer than V elements) goes to the first
// threads, each block combines its threads by a fixed tree (block_reduce), and a second one-block
// kernel combines the G block results the same way. G depends on n alone, and unaligned inputs load
// the same packs element by element, so the order of additions, hence every bit of the result,
// depends on n and the values only.
#include <cstdint>

#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/gpu/reduce_kernels.h"

namespace hg::gpu {

namespace {

constexpr int kThreads = 512;
constexpr int kFinalThreads = 1024;
constexpr int64_t kMaxBlocks = 1024;  // partial sums at most
// Elements per block before the grid grows (4 packs of f32 per thread), so mid-sized inputs
// (1e6) already spread over ~128 SMs; at most kMaxBlocks partial sums for the second kernel.
constexpr int64_t kElementsPerBlock = 1 << 13;

template <typename T>
inline constexpr int kPack = int(16 / sizeof(T));

// block_sum (kernel_util.cuh) with r's combination: the same tree, so for a sum the same bits.
template <typename R>
__device__ inline float block_reduce(float v, float* scratch, R r) {
  for (int m = kWarp / 2; m > 0; m >>= 1) v = r.combine(v, shfl_xor(v, m));
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  v = int(threadIdx.x) < warps ? scratch[threadIdx.x] : r.identity();
  if (warp == 0)
    for (int m = kWarp / 2; m > 0; m >>= 1) v = r.combine(v, shfl_xor(v, m));
  __syncthreads();
  return v;
}

template <typename T, bool Aligned, typename R>
__global__ void __launch_bounds__(kThreads)
    reduce_blocks(const T* __restrict__ x, int64_t n, R r, float* __restrict__ out) {
  __shared__ float scratch[kMaxWarpsPerBlock];
  constexpr int V = kPack<T>;
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  float acc = r.identity();
  for (int64_t i = tid; i < packs; i += stride) {
    float part = r.identity();
    if constexpr (Aligned) {
      const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(x)[i];
#pragma unroll
      for (int k = 0; k < V; ++k) part = r.combine(part, r.map(to_float(p.v[k])));
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) part = r.combine(part, r.map(to_float(x[i * V + k])));
    }
    acc = r.combine(acc, part);
  }
  const int64_t t = packs * V + tid;
  if (t < n) acc = r.combine(acc, r.map(to_float(x[t])));
  acc = block_reduce(acc, scratch, r);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

template <typename R>
__global__ void __launch_bounds__(kFinalThreads)
    reduce_final(const float* __restrict__ partials, int64_t count, R r, float* __restrict__ out) {
  __shared__ float scratch[kMaxWarpsPerBlock];
  float acc = r.identity();
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc = r.combine(acc, partials[i]);
  acc = block_reduce(acc, scratch, r);
  if (threadIdx.x == 0) out[0] = acc;
}

int64_t blocks_for(int64_t n) {
  const int64_t b = (n + kElementsPerBlock - 1) / kElementsPerBlock;
  return b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b);
}

template <typename T, typename R>
void reduce(const void* x0, int64_t n, R r, float* partials, float* out, gpuStream_t stream) {
  const T* x = static_cast<const T*>(x0);
  const int64_t blocks = blocks_for(n);
  float* first = blocks == 1 ? out : partials;
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0)
    reduce_blocks<T, true><<<unsigned(blocks), kThreads, 0, stream>>>(x, n, r, first);
  else
    reduce_blocks<T, false><<<unsigned(blocks), kThreads, 0, stream>>>(x, n, r, first);
  HG_GPU_CHECK_LAUNCH();
  if (blocks > 1) {
    reduce_final<<<1, kFinalThreads, 0, stream>>>(partials, blocks, r, out);
    HG_GPU_CHECK_LAUNCH();
  }
}

}  // namespace

int64_t reduce_partials(int64_t n) {
  const int64_t blocks = blocks_for(n);
  return blocks == 1 ? 0 : blocks;
}

void launch_reduce(ReduceOp op, const void* x, int64_t n, DType dtype, float* partials, float* out,
                   gpuStream_t stream) {
  dispatch_float("reduce", dtype, [&]<typename T>() {
    switch (op) {
#define HG_REDUCE_CASE(name, Functor)                                    \
  case ReduceOp::name:                                                   \
    reduce<T>(x, n, reduction::Functor<float>{}, partials, out, stream); \
    break;
      HG_REDUCTION_OPS(HG_REDUCE_CASE)
#undef HG_REDUCE_CASE
    }
  });
}

}  // namespace hg::gpu
