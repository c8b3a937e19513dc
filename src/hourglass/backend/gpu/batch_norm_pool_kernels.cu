// Batch norm + ReLU + 3x3 stride-2 max pooling in training (an image network's stem):
// z = relu(bn(x)) is computed inside the pooling pass and never stored. Apart, the normalising
// pass reads x and writes z, and the pooling pass reads z back: ResNet-50's stem output is
// 411 MB in bf16 a step, so two passes over it fewer.
//
// The statistics are batch_norm_kernels.cu's kernel (batch_norm_common.cuh). Then one thread
// per pooled output and 8 channels: it normalises the nine inputs of its window as
// batch_norm_normalize_kernel does (the same f32 expression, the ReLU, one rounding to T),
// keeps the first maximum of the rounded values as the pooling kernel does (the same value and
// arg-max record), and stores the ReLU mask bytes of the 2x2 inputs at the window's centre
// and below-right, rows 2p, 2p + 1 and columns 2q, 2q + 1: with an even height and width those
// blocks tile the input, so every mask byte is written once. Same bits as
// batch_norm_relu_train_launch followed by launch_max_pool.
#include "hourglass/backend/gpu/batch_norm_common.cuh"
#include "hourglass/backend/gpu/batch_norm_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {
namespace {

using namespace bn;  // the kernels' shared pieces (batch_norm_common.cuh)

constexpr int kPoolThreads = 256;
constexpr int kVec = 8;          // channels a thread: one 16-byte load of a 16-bit type
constexpr uint8_t kNoArg = 255;  // the u8 arg-max record of a window without inputs

// Flat indices are 32-bit: the launcher checks that the input's elements fit.
template <typename T>
__global__ void __launch_bounds__(kPoolThreads)
    batch_norm_relu_max_pool_kernel(const T* __restrict__ x, T* __restrict__ y,
                                    uint8_t* __restrict__ argmax, uint8_t* __restrict__ mask, int h,
                                    int w, int channels, int p, int q, unsigned total,
                                    const float* __restrict__ weight,
                                    const float* __restrict__ bias,
                                    const float* __restrict__ mean_in,
                                    const float* __restrict__ invstd) {
  const unsigned vectors = unsigned(channels / kVec);
  for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const unsigned cv = t % vectors;
    unsigned rest = t / vectors;
    const int oq = int(rest % unsigned(q));
    rest /= unsigned(q);
    const int op = int(rest % unsigned(p));
    const int image = int(rest / unsigned(p));
    float mean[kVec], scale[kVec], shift[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int c = int(cv) * kVec + i;
      mean[i] = mean_in[c];
      scale[i] = weight[c] * invstd[c];
      shift[i] = bias[c];
    }
    float best[kVec];
    uint8_t arg[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      best[i] = -INFINITY;
      arg[i] = kNoArg;
    }
    const int image_row = image * h;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      const int row = 2 * op - 1 + r;
      if (row < 0 || row >= h) continue;
#pragma unroll
      for (int s = 0; s < 3; ++s) {
        const int col = 2 * oq - 1 + s;
        if (col < 0 || col >= w) continue;
        const int pixel = (image_row + row) * w + col;
        const Pack<T, kVec> xs = load_pack<T, kVec>(x + pixel * channels + int(cv) * kVec);
        unsigned bits = 0;
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          float v = (to_float(xs.v[i]) - mean[i]) * scale[i] + shift[i];
          v = v < 0.0f ? 0.0f : v;
          const float z = to_float(from_float<T>(v));
          bits |= unsigned(z > 0.0f) << i;
          if (arg[i] == kNoArg || z > best[i]) {  // the first maximum wins ties
            best[i] = z;
            arg[i] = uint8_t(r * 3 + s);
          }
        }
        if (r >= 1 && s >= 1) mask[pixel * (channels / 8) + int(cv)] = uint8_t(bits);
      }
    }
    const int out = ((image * p + op) * q + oq) * channels + int(cv) * kVec;
    Pack<T, kVec> ys;
    Pack<uint8_t, kVec> as;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      ys.v[i] = from_float<T>(best[i]);
      as.v[i] = arg[i];
    }
    *reinterpret_cast<Pack<T, kVec>*>(y + out) = ys;
    *reinterpret_cast<Pack<uint8_t, kVec>*>(argmax + out) = as;
  }
}

}  // namespace

bool batch_norm_relu_max_pool_fits(const BatchNormPlan& plan, DType dtype, const PoolGeometry& g) {
  return dtype_size(dtype) == 2 && plan.vec == kVec && g.kernel_h == 3 && g.kernel_w == 3 &&
         g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 1 && g.pad_w == 1 && g.h % 2 == 0 &&
         g.w % 2 == 0 && g.p == g.h / 2 && g.q == g.w / 2 && g.c % kVec == 0 &&
         g.n * g.h * g.w * g.c < (int64_t(1) << 31);
}

void batch_norm_relu_max_pool_train_launch(const BatchNormPlan& plan, DType dtype,
                                           const PoolGeometry& g, const void* x, void* y,
                                           uint8_t* argmax, uint8_t* mask,
                                           const BatchNormTrainPointers& bn, double momentum,
                                           double eps, float* workspace, unsigned* counters,
                                           gpuStream_t stream) {
  const int64_t rows = g.n * g.h * g.w;
  if (rows == 0 || g.c == 0) return;
  const char* op = "batch_norm_relu_max_pool_train";
  dispatch_float(op, dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      const T* xt = static_cast<const T*>(x);
      batch_norm_stats_kernel<T, kVec>
          <<<dim3(unsigned(plan.columns), unsigned(plan.row_blocks)), block_of(plan), 0, stream>>>(
              xt, rows, g.c, plan.rows_per_block, bn.running_mean, bn.running_var, momentum, eps,
              bn.save_mean, bn.save_invstd, workspace, workspace + plan.row_blocks * g.c, counters);
      HG_GPU_CHECK_LAUNCH();
      const int64_t total = g.n * g.p * g.q * (g.c / kVec);
      batch_norm_relu_max_pool_kernel<T>
          <<<grid_for(total, kPoolThreads), kPoolThreads, 0, stream>>>(
              xt, static_cast<T*>(y), argmax, mask, int(g.h), int(g.w), int(g.c), int(g.p),
              int(g.q), unsigned(total), bn.weight, bn.bias, bn.save_mean, bn.save_invstd);
      HG_GPU_CHECK_LAUNCH();
    } else {
      unsupported_dtype(op, dtype);  // batch_norm_relu_max_pool_fits admits 16-bit types only
    }
  });
}

}  // namespace hg::gpu
