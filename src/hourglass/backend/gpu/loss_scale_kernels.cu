// Dynamic loss scaling on the device (the rules of torch.amp.GradScaler, as the CPU backend's):
// unscaling with the inf/NaN check as one vectorised grid-stride pass, and the scale update as
// a one-thread kernel.
#include <cmath>
#include <cstdint>

#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/gpu/loss_scale_kernels.h"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

// No __restrict__ on state: every thread reads state[0] while some may store to state[1].
template <int V>
__global__ void __launch_bounds__(kThreads)
    unscale_kernel(float* __restrict__ grads, int64_t n, float* state) {
  const float inv_scale = 1.0f / state[0];
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  bool found = false;
  for (int64_t i = tid; i < packs; i += stride) {
    Pack<float, V> g = reinterpret_cast<Pack<float, V>*>(grads)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      g.v[k] *= inv_scale;
      found |= !isfinite(g.v[k]);
    }
    reinterpret_cast<Pack<float, V>*>(grads)[i] = g;
  }
  const int64_t t = packs * V + tid;
  if (t < n) {
    grads[t] *= inv_scale;
    found |= !isfinite(grads[t]);
  }
  // Every writer stores the same value, so the races are benign; nothing else writes state[1]
  // during this kernel.
  if (found) state[1] = 1.0f;
}

__global__ void update_scale_kernel(float* state, double growth, double backoff,
                                    int64_t growth_interval) {
  float* s = state;
  if (s[1] != 0.0f) {
    s[0] = float(double(s[0]) * backoff);
    s[2] = 0.0f;
  } else {
    s[2] += 1.0f;
    if (int64_t(s[2]) >= growth_interval) {
      const float grown = float(double(s[0]) * growth);
      if (isfinite(grown)) s[0] = grown;  // never grow the scale to inf
      s[2] = 0.0f;
    }
  }
  s[1] = 0.0f;
}

}  // namespace

void launch_unscale_grads(float* grads, int64_t n, float* state, gpuStream_t stream) {
  if (n <= 0) return;
  if (reinterpret_cast<uintptr_t>(grads) % 16 == 0)
    unscale_kernel<4>
        <<<grid_for(n / 4 > 0 ? n / 4 : 1, kThreads), kThreads, 0, stream>>>(grads, n, state);
  else
    unscale_kernel<1><<<grid_for(n, kThreads), kThreads, 0, stream>>>(grads, n, state);
  HG_GPU_CHECK_LAUNCH();
}

void launch_update_loss_scale(float* state, double growth, double backoff, int64_t growth_interval,
                              gpuStream_t stream) {
  update_scale_kernel<<<1, 1, 0, stream>>>(state, growth, backoff, growth_interval);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
