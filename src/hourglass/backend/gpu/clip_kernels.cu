// Global-norm gradient clipping on the device: the decision (finite norm, coef < 1) is taken by
// every thread from the same device scalar, so no value goes to the host. The scaling is one
// vectorised grid-stride pass, as float4 when the gradients are 16-byte aligned (the arena
// always is), the last n % 4 elements by the first threads.
#include <cstdint>

#include "hourglass/backend/gpu/clip_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

// No __restrict__ on sum_squares and norm: a caller may keep both in one small state tensor.
template <int V>
__global__ void __launch_bounds__(kThreads)
    clip_kernel(float* __restrict__ grads, int64_t n, const float* sum_squares, double max_norm,
                float* norm) {
  const double total = sqrt(double(*sum_squares));
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tid == 0) *norm = float(total);
  // PyTorch adds 1e-6 to the norm before dividing, so a zero gradient never divides by zero.
  const double coef = max_norm / (total + 1e-6);
  // A non-finite norm (inf or NaN gradient) leaves the gradients as they are.
  if (!isfinite(total) || !(coef < 1.0)) return;
  const float c = float(coef);
  const int64_t packs = n / V;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < packs; i += stride) {
    Pack<float, V> g = reinterpret_cast<Pack<float, V>*>(grads)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) g.v[k] *= c;
    reinterpret_cast<Pack<float, V>*>(grads)[i] = g;
  }
  const int64_t t = packs * V + tid;
  if (t < n) grads[t] *= c;
}

}  // namespace

void launch_clip_grads(float* grads, int64_t n, const float* sum_squares, double max_norm,
                       float* norm, gpuStream_t stream) {
  if (n >= 4 && reinterpret_cast<uintptr_t>(grads) % 16 == 0)
    clip_kernel<4>
        <<<grid_for(n / 4, kThreads), kThreads, 0, stream>>>(grads, n, sum_squares, max_norm, norm);
  else
    clip_kernel<1><<<grid_for(n > 0 ? n : 1, kThreads), kThreads, 0, stream>>>(
        grads, n, sum_squares, max_norm, norm);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
