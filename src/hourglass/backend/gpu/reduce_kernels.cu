// Full reductions to one f32 value, deterministic: the input is cut into packs of V elements
// (4 f32 or 8 bf16/f16); thread t of a grid of G blocks adds packs t, t + G*T, ... in order,
// then the tail (fewer than V elements) goes to the first threads, each block adds its threads
// by a fixed tree (block_sum), and a second one-block kernel adds the G block sums the same
// way. G depends on n alone, and unaligned inputs load the same packs element by element, so
// the order of additions, hence every bit of the result, depends on n and the values only.
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

struct SumOp {
  __device__ float operator()(float v) const { return v; }
};
struct SquareOp {
  __device__ float operator()(float v) const { return v * v; }
};

template <typename T, bool Aligned, typename Op>
__global__ void __launch_bounds__(kThreads)
    reduce_blocks(const T* __restrict__ x, int64_t n, Op op, float* __restrict__ out) {
  __shared__ float scratch[kMaxWarpsPerBlock];
  constexpr int V = kPack<T>;
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  float acc = 0.0f;
  for (int64_t i = tid; i < packs; i += stride) {
    float part = 0.0f;
    if constexpr (Aligned) {
      const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(x)[i];
#pragma unroll
      for (int k = 0; k < V; ++k) part += op(to_float(p.v[k]));
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) part += op(to_float(x[i * V + k]));
    }
    acc += part;
  }
  const int64_t t = packs * V + tid;
  if (t < n) acc += op(to_float(x[t]));
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kFinalThreads)
    reduce_final(const float* __restrict__ partials, int64_t count, float* __restrict__ out) {
  __shared__ float scratch[kMaxWarpsPerBlock];
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[0] = acc;
}

int64_t blocks_for(int64_t n) {
  const int64_t b = (n + kElementsPerBlock - 1) / kElementsPerBlock;
  return b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b);
}

template <typename T, typename Op>
void reduce(const void* x0, int64_t n, Op op, float* partials, float* out, gpuStream_t stream) {
  const T* x = static_cast<const T*>(x0);
  const int64_t blocks = blocks_for(n);
  float* first = blocks == 1 ? out : partials;
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0)
    reduce_blocks<T, true><<<unsigned(blocks), kThreads, 0, stream>>>(x, n, op, first);
  else
    reduce_blocks<T, false><<<unsigned(blocks), kThreads, 0, stream>>>(x, n, op, first);
  HG_GPU_CHECK_LAUNCH();
  if (blocks > 1) {
    reduce_final<<<1, kFinalThreads, 0, stream>>>(partials, blocks, out);
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
    if (op == ReduceOp::Sum)
      reduce<T>(x, n, SumOp{}, partials, out, stream);
    else
      reduce<T>(x, n, SquareOp{}, partials, out, stream);
  });
}

}  // namespace hg::gpu
