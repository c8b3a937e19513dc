// Space-to-depth moves of a stride-2 convolution's operands (space_to_depth_kernels.h): copies
// with zeros, no arithmetic, so the rewritten convolution multiplies the same values.
#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/gpu/space_to_depth_kernels.h"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kPhases = 4;  // (ph, pw) in {0,1}^2 of a 2x2 block
constexpr int64_t kBlockChannels = kPhases * kSpaceToDepthChannels;

// One thread per pixel block (kCols = 2: 2x2 pixels; 4: 2x4): its pixels' channels, one vector
// each. A block's threads have consecutive pixel blocks, so their output is one contiguous run:
// staged in shared memory and stored as 16-byte vectors, every one whole. (Stored directly, a
// thread's four 8-byte vectors left each warp's stores a quarter dense: ResNet-50's stem input
// took 109 us on the H200, 1.7 TB/s; staged, 49 us.) Flat indices are 32-bit when the blocks fit
// (the divisions are the kernel's main arithmetic).
template <typename T, typename Index, int kCols>
__global__ void __launch_bounds__(kThreads)
    space_to_depth_input_kernel(const T* __restrict__ x, T* __restrict__ blocks, int64_t n,
                                int64_t h, int64_t w, int64_t c, int64_t hb, int64_t wb,
                                int64_t pad_h, int64_t pad_w) {
  using Vec = Pack<T, kSpaceToDepthChannels>;
  constexpr int kPixels = 2 * kCols;
  constexpr int kBlockBytes = int(kPixels * sizeof(Vec));  // a multiple of 16
  __shared__ uint4 s_out[kThreads * kBlockBytes / 16];
  Vec* staged = reinterpret_cast<Vec*>(s_out);
  const Index total = Index(n * hb * wb);
  for (Index base = Index(blockIdx.x) * blockDim.x; base < total;
       base += Index(gridDim.x) * blockDim.x) {
    const Index t = base + Index(threadIdx.x);
    if (t < total) {
      const Index j = t % Index(wb);
      const Index rest = t / Index(wb);
      const Index i = rest % Index(hb);
      const Index b = rest / Index(hb);
#pragma unroll
      for (int phase = 0; phase < kPixels; ++phase) {
        const int64_t row = 2 * int64_t(i) + phase / kCols - pad_h;
        const int64_t col = kCols * int64_t(j) + phase % kCols - pad_w;
        const bool inside = row >= 0 && row < h && col >= 0 && col < w;
        const T* src = x + ((int64_t(b) * h + (inside ? row : 0)) * w + (inside ? col : 0)) * c;
        Vec v;
#pragma unroll
        for (int ch = 0; ch < kSpaceToDepthChannels; ++ch)
          v.v[ch] = inside && ch < c ? src[ch] : from_float<T>(0.0f);
        staged[threadIdx.x * kPixels + phase] = v;
      }
    }
    __syncthreads();
    const Index count = total - base < Index(blockDim.x) ? total - base : Index(blockDim.x);
    const int chunks = int(count) * (kBlockBytes / 16);
    uint4* out =
        reinterpret_cast<uint4*>(reinterpret_cast<char*>(blocks) + int64_t(base) * kBlockBytes);
    for (int k = int(threadIdx.x); k < chunks; k += int(blockDim.x)) out[k] = s_out[k];
    __syncthreads();
  }
}

// The weights' block columns for a filter of width s over blocks of kCols pixel columns: the
// kCols / 2 output pixels of a block start 0, 2, ... columns into its span.
template <int kCols>
__host__ __device__ constexpr int64_t weight_block_cols(int64_t s) {
  return (s + kCols - 2 + kCols - 1) / kCols;
}

// One thread per element of the rewritten weights [(kCols / 2) k, (r + 1) / 2,
// weight_block_cols<kCols>(s), 2 kCols phases of kSpaceToDepthChannels]: 2x2 blocks (kCols 2,
// [k, r2, s2, 64]) or the pairs' 2x4 blocks (kCols 4, [2k, r2, s4, 128]). Output channel
// e * k + o is output pixel kCols / 2 * X + e's channel o, whose window starts 2e columns into
// the block's span.
template <typename T, int kCols>
__global__ void __launch_bounds__(kThreads)
    space_to_depth_weight_kernel(const T* __restrict__ w, T* __restrict__ blocks, int64_t k,
                                 int64_t r, int64_t s, int64_t c) {
  constexpr int64_t kBlockPhases = 2 * kCols, kChannels = kBlockPhases * kSpaceToDepthChannels;
  const int64_t r2 = (r + 1) / 2, sb = weight_block_cols<kCols>(s);
  const int64_t total = kCols / 2 * k * r2 * sb * kChannels;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = t % kSpaceToDepthChannels;
    const int64_t phase = t / kSpaceToDepthChannels % kBlockPhases;
    int64_t rest = t / kChannels;
    const int64_t bs = rest % sb;
    rest /= sb;
    const int64_t br = rest % r2;
    const int64_t eo = rest / r2;
    const int64_t e = eo / k, o = eo % k;
    const int64_t fr = 2 * br + phase / kCols, fs = kCols * bs + phase % kCols - 2 * e;
    blocks[t] = fr < r && fs >= 0 && fs < s && ch < c ? w[((o * r + fr) * s + fs) * c + ch]
                                                      : from_float<T>(0.0f);
  }
}

// One thread per element of the weight gradient [k, r, s, c].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    space_to_depth_weight_grad_kernel(const T* __restrict__ blocks, T* __restrict__ dw, int64_t k,
                                      int64_t r, int64_t s, int64_t c) {
  const int64_t r2 = (r + 1) / 2, s2 = (s + 1) / 2;
  const int64_t total = k * r * s * c;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = t % c;
    int64_t rest = t / c;
    const int64_t fs = rest % s;
    rest /= s;
    const int64_t fr = rest % r;
    const int64_t o = rest / r;
    const int64_t phase = (fr % 2) * 2 + fs % 2;
    dw[t] = blocks[((o * r2 + fr / 2) * s2 + fs / 2) * kBlockChannels +
                   phase * kSpaceToDepthChannels + ch];
  }
}

}  // namespace

namespace {

template <int kCols>
void launch_input(const void* x, void* blocks, int64_t n, int64_t h, int64_t w, int64_t c,
                  int64_t hb, int64_t wb, int64_t pad_h, int64_t pad_w, DType dtype,
                  gpuStream_t stream) {
  const int64_t total = n * hb * wb;
  if (total == 0) return;
  dispatch_float("space_to_depth", dtype, [&]<typename T>() {
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(blocks);
    if (total < (int64_t(1) << 31))
      space_to_depth_input_kernel<T, int32_t, kCols>
          <<<grid_for(total, kThreads), kThreads, 0, stream>>>(in, out, n, h, w, c, hb, wb, pad_h,
                                                               pad_w);
    else
      space_to_depth_input_kernel<T, int64_t, kCols>
          <<<grid_for(total, kThreads), kThreads, 0, stream>>>(in, out, n, h, w, c, hb, wb, pad_h,
                                                               pad_w);
    HG_GPU_CHECK_LAUNCH();
  });
}

template <int kCols>
void launch_weight(const void* w, void* blocks, int64_t k, int64_t r, int64_t s, int64_t c,
                   DType dtype, gpuStream_t stream) {
  const int64_t total = kCols / 2 * k * ((r + 1) / 2) * weight_block_cols<kCols>(s) * 2 * kCols *
                        kSpaceToDepthChannels;
  if (total == 0) return;
  dispatch_float("space_to_depth", dtype, [&]<typename T>() {
    space_to_depth_weight_kernel<T, kCols><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(w), static_cast<T*>(blocks), k, r, s, c);
    HG_GPU_CHECK_LAUNCH();
  });
}

}  // namespace

void launch_space_to_depth_input(const void* x, void* blocks, int64_t n, int64_t h, int64_t w,
                                 int64_t c, int64_t hb, int64_t wb, int64_t pad_h, int64_t pad_w,
                                 DType dtype, gpuStream_t stream) {
  launch_input<2>(x, blocks, n, h, w, c, hb, wb, pad_h, pad_w, dtype, stream);
}

void launch_space_to_depth_pair_input(const void* x, void* blocks, int64_t n, int64_t h, int64_t w,
                                      int64_t c, int64_t hb, int64_t wb, int64_t pad_h,
                                      int64_t pad_w, DType dtype, gpuStream_t stream) {
  launch_input<4>(x, blocks, n, h, w, c, hb, wb, pad_h, pad_w, dtype, stream);
}

void launch_space_to_depth_weight(const void* w, void* blocks, int64_t k, int64_t r, int64_t s,
                                  int64_t c, DType dtype, gpuStream_t stream) {
  launch_weight<2>(w, blocks, k, r, s, c, dtype, stream);
}

void launch_space_to_depth_pair_weight(const void* w, void* blocks, int64_t k, int64_t r, int64_t s,
                                       int64_t c, DType dtype, gpuStream_t stream) {
  static_assert(weight_block_cols<4>(7) == space_to_depth_pair_width(7));
  launch_weight<4>(w, blocks, k, r, s, c, dtype, stream);
}

void launch_space_to_depth_weight_grad(const void* blocks, void* dw, int64_t k, int64_t r,
                                       int64_t s, int64_t c, DType dtype, gpuStream_t stream) {
  const int64_t total = k * r * s * c;
  if (total == 0) return;
  dispatch_float("space_to_depth", dtype, [&]<typename T>() {
    space_to_depth_weight_grad_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(blocks), static_cast<T*>(dw), k, r, s, c);
    HG_GPU_CHECK_LAUNCH();
  });
}

}  // namespace hg::gpu
