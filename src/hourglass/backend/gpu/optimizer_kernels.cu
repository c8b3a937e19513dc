// Fused optimizer updates over the flat parameter arena: one grid-stride kernel per step that
// reads each stream once and writes it once, as float4 when every pointer is 16-byte aligned
// (the arena always is), one float at a time otherwise, the last n % 4 elements by the first
// threads. The per-element arithmetic is the CPU backend's, in f32.
#include <cstdint>

#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/gpu/optimizer_kernels.h"
#include "hourglass/backend/lars_trust.h"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

template <int V>
__device__ inline Pack<float, V> load(const float* p, int64_t i) {
  return reinterpret_cast<const Pack<float, V>*>(p)[i];
}
template <int V>
__device__ inline void store(float* p, int64_t i, const Pack<float, V>& f) {
  reinterpret_cast<Pack<float, V>*>(p)[i] = f;
}

struct SgdUpdate {
  SgdCoefficients c;
  // Without momentum.
  __device__ float operator()(float p, float g) const {
    const float d = c.decay ? g + c.weight_decay * p : g;
    return p - c.lr * d;
  }
  // With momentum: updates the buffer b in place.
  __device__ float operator()(float p, float g, float& b) const {
    const float d = c.decay ? g + c.weight_decay * p : g;
    // PyTorch starts the buffer at the first gradient itself, without dampening.
    b = c.first_step ? d : c.momentum * b + c.keep * d;
    return p - c.lr * (c.nesterov ? d + c.momentum * b : b);
  }
};

// Elements [i * V, i * V + V) for packs, or the single element i of the tail when V = 1.
template <int V, bool Momentum>
__device__ inline void sgd_pack(float* params, const float* grads, float* momentum, int64_t i,
                                const SgdUpdate& u) {
  Pack<float, V> p = load<V>(params, i);
  const Pack<float, V> g = load<V>(grads, i);
  if constexpr (Momentum) {
    Pack<float, V> b = load<V>(momentum, i);
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = u(p.v[k], g.v[k], b.v[k]);
    store<V>(momentum, i, b);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = u(p.v[k], g.v[k]);
  }
  store<V>(params, i, p);
}

template <int V, bool Momentum>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(float* __restrict__ params, const float* __restrict__ grads,
               float* __restrict__ momentum, int64_t n, SgdUpdate u, const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;  // NaN counts as nonzero, as on the CPU
  if (u.c.lr_device != nullptr) u.c.lr = float(*u.c.lr_device);
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < packs; i += stride)
    sgd_pack<V, Momentum>(params, grads, momentum, i, u);
  const int64_t t = packs * V + tid;
  if (t < n) sgd_pack<1, Momentum>(params, grads, momentum, t, u);
}

struct AdamWUpdate {
  AdamWCoefficients c;
  float step_size, inv_sqrt_bc2;  // the bias corrections of this update
  __device__ float operator()(float p, float g, float& m, float& v) const {
    m = c.beta1 * m + c.one_minus_beta1 * g;
    v = c.beta2 * v + c.one_minus_beta2 * g * g;
    const float denom = sqrtf(v) * inv_sqrt_bc2 + c.eps;
    return p * c.decay - step_size * m / denom;
  }
};

template <int V>
__device__ inline void adamw_pack(float* params, const float* grads, float* exp_avg,
                                  float* exp_avg_sq, int64_t i, const AdamWUpdate& u) {
  Pack<float, V> p = load<V>(params, i);
  const Pack<float, V> g = load<V>(grads, i);
  Pack<float, V> m = load<V>(exp_avg, i);
  Pack<float, V> v = load<V>(exp_avg_sq, i);
#pragma unroll
  for (int k = 0; k < V; ++k) p.v[k] = u(p.v[k], g.v[k], m.v[k], v.v[k]);
  store<V>(exp_avg, i, m);
  store<V>(exp_avg_sq, i, v);
  store<V>(params, i, p);
}

template <int V>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* __restrict__ params, const float* __restrict__ grads,
                 float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n,
                 AdamWCoefficients c, const float* step, const float* skip) {
  // Every thread of a block reads the same flag, so the whole block returns or none does.
  if (skip != nullptr && *skip != 0.0f) return;
  // The bias corrections in double from the device's update number, as the CPU computes them
  // on the host: once per block, shared.
  __shared__ float bias[3];
  if (threadIdx.x == 0) {
    const double t = double(*step);
    const double lr = c.lr_device != nullptr ? *c.lr_device : c.lr;
    bias[0] = float(lr / (1.0 - pow(c.beta1_exact, t)));
    bias[1] = float(1.0 / sqrt(1.0 - pow(c.beta2_exact, t)));
    bias[2] = c.lr_device != nullptr ? float(__dsub_rn(1.0, __dmul_rn(lr, c.weight_decay_exact)))
                                     : c.decay;
  }
  __syncthreads();
  AdamWUpdate u{c, bias[0], bias[1]};
  u.c.decay = bias[2];
  const int64_t packs = n / V;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < packs; i += stride)
    adamw_pack<V>(params, grads, exp_avg, exp_avg_sq, i, u);
  const int64_t t = packs * V + tid;
  if (t < n) adamw_pack<1>(params, grads, exp_avg, exp_avg_sq, t, u);
}

// No __restrict__: the skip flag and the count may be elements of one state tensor.
__global__ void advance_step_kernel(float* step, const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;  // NaN counts as nonzero, as on the CPU
  *step += 1.0f;
}

__global__ void __launch_bounds__(kThreads)
    lamb_direction_kernel(float* out, const float* __restrict__ params, const float* grads,
                          float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, int64_t n,
                          AdamWCoefficients c, float weight_decay, const float* step,
                          const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;  // NaN counts as nonzero, as on the CPU
  __shared__ float bias[2];
  if (threadIdx.x == 0) {
    const double t = double(*step);
    bias[0] = float(1.0 / (1.0 - pow(c.beta1_exact, t)));
    bias[1] = float(1.0 / sqrt(1.0 - pow(c.beta2_exact, t)));
  }
  __syncthreads();
  const float inv_bc1 = bias[0], inv_sqrt_bc2 = bias[1];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = grads[i];
    const float m = c.beta1 * exp_avg[i] + c.one_minus_beta1 * g;
    const float v = c.beta2 * exp_avg_sq[i] + c.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    out[i] =
        fmaf(weight_decay, params[i],
             __fdiv_rn(__fmul_rn(m, inv_bc1), __fadd_rn(__fmul_rn(sqrtf(v), inv_sqrt_bc2), c.eps)));
  }
}

// One block per segment: each thread's double partial over a fixed stride, then a fixed tree.
__global__ void __launch_bounds__(kThreads)
    segment_sum_squares_kernel(const float* __restrict__ x, const int64_t* __restrict__ offsets,
                               float* __restrict__ out) {
  const int64_t s = blockIdx.x;
  double sum = 0;
  for (int64_t i = offsets[s] + threadIdx.x; i < offsets[s + 1]; i += kThreads)
    sum += double(x[i]) * double(x[i]);
  __shared__ double part[kThreads];
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (int(threadIdx.x) < width) part[threadIdx.x] += part[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[s] = float(part[0]);
}

// Blocks (chunk, segment): each segment's elements in a grid-stride loop over its chunks.
__global__ void __launch_bounds__(kThreads)
    lars_adapt_kernel(float* __restrict__ grads, const float* __restrict__ params,
                      const int64_t* __restrict__ offsets, const float* __restrict__ params_sq,
                      const float* __restrict__ grads_sq, LarsCoefficients c) {
  const int64_t s = blockIdx.y;
  const double lr = c.trust_clip ? *c.lr_device : 1.0;
  const float trust =
      lars_trust(params_sq[s], grads_sq[s], c.weight_decay, c.trust_coeff, c.eps, c.trust_clip, lr);
  const float wd = float(c.weight_decay);
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = offsets[s] + int64_t(blockIdx.x) * kThreads + threadIdx.x; i < offsets[s + 1];
       i += stride)
    grads[i] = __fmul_rn(fmaf(wd, params[i], grads[i]), trust);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

unsigned blocks_for(int64_t packs) { return grid_for(packs > 0 ? packs : 1, kThreads); }

}  // namespace

void launch_sgd(float* params, const float* grads, float* momentum, int64_t n,
                const SgdCoefficients& c, const float* skip, gpuStream_t stream) {
  if (n <= 0) return;
  const SgdUpdate u{c};
  const bool vec = aligned16(params) && aligned16(grads) && (!momentum || aligned16(momentum));
  if (momentum != nullptr) {
    if (vec)
      sgd_kernel<4, true>
          <<<blocks_for(n / 4), kThreads, 0, stream>>>(params, grads, momentum, n, u, skip);
    else
      sgd_kernel<1, true>
          <<<blocks_for(n), kThreads, 0, stream>>>(params, grads, momentum, n, u, skip);
  } else {
    if (vec)
      sgd_kernel<4, false>
          <<<blocks_for(n / 4), kThreads, 0, stream>>>(params, grads, nullptr, n, u, skip);
    else
      sgd_kernel<1, false>
          <<<blocks_for(n), kThreads, 0, stream>>>(params, grads, nullptr, n, u, skip);
  }
  HG_GPU_CHECK_LAUNCH();
}

void launch_adamw(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const AdamWCoefficients& c, const float* step, const float* skip,
                  gpuStream_t stream) {
  if (n <= 0) return;
  if (aligned16(params) && aligned16(grads) && aligned16(exp_avg) && aligned16(exp_avg_sq))
    adamw_kernel<4><<<blocks_for(n / 4), kThreads, 0, stream>>>(params, grads, exp_avg, exp_avg_sq,
                                                                n, c, step, skip);
  else
    adamw_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(params, grads, exp_avg, exp_avg_sq, n,
                                                            c, step, skip);
  HG_GPU_CHECK_LAUNCH();
}

void launch_lamb_direction(float* out, const float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, int64_t n, const AdamWCoefficients& c,
                           float weight_decay, const float* step, const float* skip,
                           gpuStream_t stream) {
  if (n <= 0) return;
  lamb_direction_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      out, params, grads, exp_avg, exp_avg_sq, n, c, weight_decay, step, skip);
  HG_GPU_CHECK_LAUNCH();
}

void launch_segment_sum_squares(const float* x, const int64_t* offsets, int64_t segments,
                                float* out, gpuStream_t stream) {
  if (segments <= 0) return;
  segment_sum_squares_kernel<<<unsigned(segments), kThreads, 0, stream>>>(x, offsets, out);
  HG_GPU_CHECK_LAUNCH();
}

void launch_lars_adapt_grads(float* grads, const float* params, const int64_t* offsets,
                             int64_t segments, const float* params_sq, const float* grads_sq,
                             const LarsCoefficients& c, gpuStream_t stream) {
  if (segments <= 0) return;
  const dim3 grid(32, unsigned(segments));
  lars_adapt_kernel<<<grid, kThreads, 0, stream>>>(grads, params, offsets, params_sq, grads_sq, c);
  HG_GPU_CHECK_LAUNCH();
}

void launch_advance_step(float* step, const float* skip, gpuStream_t stream) {
  advance_step_kernel<<<1, 1, 0, stream>>>(step, skip);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
