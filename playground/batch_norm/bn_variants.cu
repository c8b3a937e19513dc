// Batch-norm kernel variants at the shapes of ResNet-50 (224 px, batch 256) and the CIFAR
// ResNet-18 (batch 512), bf16: each variant checked bit for bit against the library's kernels
// (batch_norm_kernels.cu, included below) and timed with events, beside a copy of the same
// bytes (the memory ceiling). Prints one CSV row per shape and variant: microseconds a call,
// the bytes it really moves (every pass counted) and the rate.
//
// The library's kernels timed (the fused forward with and without residual, the statistics
// alone, the fused backward from the forward's ReLU mask bits with and without the residual's
// gradient), and one variant of the
// fused backward without residual, `mask_x`: the ReLU mask recomputed from x, the saved
// statistics and the affine parameters, rounded to the dtype as the forward rounded y (no read
// of y). Earlier variants that won moved into the library (bench/README.md, 2026-12-02, third
// session): the residual gradient stored by the sums pass, the partials loaded four at a time.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 --extended-lambda -Isrc playground/batch_norm/bn_variants.cu
//   ./a.out [repeats]
#include "harness.cuh"

namespace hg::gpu {
namespace {

// The ReLU mask of the fused forward's output, recomputed from x: the forward's normalising
// arithmetic (batch_norm_normalize_kernel with kRelu, no residual), rounded to T, > 0.
template <typename T>
__device__ inline bool relu_passed(float x, float mean, float scale, float shift) {
  const float v = __fmaf_rn(__fsub_rn(x, mean), scale, shift);
  return to_float(from_float<T>(v < 0.0f ? 0.0f : v)) > 0.0f;
}

// The gradient sums with the mask recomputed from x.
template <typename T, int V>
__global__ void HG_BN_LAUNCH_BOUNDS grad_sums_mask_x(
    const T* __restrict__ dy, const T* __restrict__ x, int64_t rows, int64_t channels,
    int64_t rows_per_block, const float* __restrict__ mean_in, const float* __restrict__ invstd,
    const float* __restrict__ weight, const float* __restrict__ bias, float* dweight, float* dbias,
    float* part_dy, float* part_dyx, unsigned* counters) {
  constexpr int kRows = kRowsPerStep<T, V, 2>;
  __shared__ float s_dy[kThreads * V];
  __shared__ float s_dyx[kThreads * V];
  __shared__ unsigned s_ticket;
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  float sum_dy[V], sum_dyx[V];
#pragma unroll
  for (int i = 0; i < V; ++i) sum_dy[i] = sum_dyx[i] = 0.0f;
  if (vector * V < channels) {
    float mean[V], scale[V], shift[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const int64_t c = vector * V + i;
      mean[i] = mean_in[c];
      scale[i] = __fmul_rn(weight[c], invstd[c]);
      shift[i] = bias[c];
    }
    const int64_t step = int64_t(by) * channels;
    for (int64_t o = ty; o < len; o += by * kRows) {
      const int64_t offset = (first + o) * channels + vector * V;
      Pack<T, V> gs[kRows], xs[kRows];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
          gs[k] = load_pack<T, V>(dy + offset + k * step);
          xs[k] = load_pack<T, V>(x + offset + k * step);
        }
      }
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        if (o + k * by < len) {
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float xv = to_float(xs[k].v[i]);
            const float g =
                relu_passed<T>(xv, mean[i], scale[i], shift[i]) ? to_float(gs[k].v[i]) : 0.0f;
            sum_dy[i] += g;
            sum_dyx[i] += g * (xv - mean[i]);
          }
        }
      }
    }
  }
  const int e = ty * int(blockDim.x) * V + int(threadIdx.x) * V;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    s_dy[e + i] = sum_dy[i];
    s_dyx[e + i] = sum_dyx[i];
  }
  if (!reduce_column<V>(s_dy, s_dyx, &s_ticket, SumMerge{}, rows, channels, rows_per_block, part_dy,
                        part_dyx, counters))
    return;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  const int width = int(blockDim.x) * V;
  const int64_t c = int64_t(blockIdx.x) * width + t;
  if (t < width && c < channels) {
    dbias[c] = s_dy[t];
    dweight[c] = invstd[c] * s_dyx[t];
  }
}

// The input gradient with the mask recomputed from x.
template <typename T, int V>
__global__ void HG_BN_LAUNCH_BOUNDS
input_grad_mask_x(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx,
                  int64_t rows, int64_t channels, int64_t rows_per_block,
                  const float* __restrict__ weight, const float* __restrict__ bias,
                  const float* __restrict__ mean_in, const float* __restrict__ invstd,
                  const float* __restrict__ dweight, const float* __restrict__ dbias) {
  constexpr int kRows = kRowsPerStep<T, V, 2>;
  alignas(16) __shared__ float s_coef[6][kMaxBlockX * 8];
  const int width = int(blockDim.x) * V;
  const int t = int(threadIdx.y * blockDim.x + threadIdx.x);
  if (t < width) {
    const int64_t c = int64_t(blockIdx.x) * width + t;
    float a = 0.0f, k = 0.0f, d = 0.0f, mean = 0.0f, scale = 0.0f, shift = 0.0f;
    if (c < channels) {
      const float inv_count = 1.0f / float(rows);
      const float inv = invstd[c];
      a = weight[c] * inv;
      k = a * inv * (dweight[c] * inv_count);
      d = -a * (dbias[c] * inv_count);
      mean = mean_in[c];
      scale = __fmul_rn(weight[c], inv);
      shift = bias[c];
    }
    s_coef[0][t] = a;
    s_coef[1][t] = k;
    s_coef[2][t] = d;
    s_coef[3][t] = mean;
    s_coef[4][t] = scale;
    s_coef[5][t] = shift;
  }
  __syncthreads();
  const int by = int(blockDim.y), ty = int(threadIdx.y);
  const int64_t vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vector * V >= channels) return;
  const int64_t first = int64_t(blockIdx.y) * rows_per_block;
  const int64_t len = min64(rows_per_block, rows - first);
  const int e = int(threadIdx.x) * V;
  const int64_t step = int64_t(by) * channels;
  for (int64_t j = steps_of(len, ty, by * kRows) - 1; j >= 0; --j) {
    const int64_t o = ty + j * by * kRows;
    const int64_t offset = (first + o) * channels + vector * V;
    Pack<T, V> gs[kRows], xs[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        gs[k] = load_pack<T, V>(dy + offset + k * step);
        xs[k] = load_pack<T, V>(x + offset + k * step);
      }
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      if (o + k * by < len) {
        float a[V], kx[V], d[V], mean[V], scale[V], shift[V], out[V];
        load_shared<V>(&s_coef[0][e], a);
        load_shared<V>(&s_coef[1][e], kx);
        load_shared<V>(&s_coef[2][e], d);
        load_shared<V>(&s_coef[3][e], mean);
        load_shared<V>(&s_coef[4][e], scale);
        load_shared<V>(&s_coef[5][e], shift);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          const float xv = to_float(xs[k].v[i]);
          const float g =
              relu_passed<T>(xv, mean[i], scale[i], shift[i]) ? to_float(gs[k].v[i]) : 0.0f;
          out[i] = a[i] * g - kx[i] * (xv - mean[i]) + d[i];
        }
        store_row<T, V>(dx + offset + k * step, out);
      }
    }
  }
}

}  // namespace
}  // namespace hg::gpu

using namespace hg;
using namespace hg::gpu;
using namespace hg::gpu::playground;

namespace {

template <typename T>
bool same_bits(const T* a, const T* b, size_t n, const char* what, const char* variant) {
  const auto ha = host_copy(a, n), hb = host_copy(b, n);
  if (std::memcmp(ha.data(), hb.data(), n * sizeof(T)) == 0) return true;
  size_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff += std::memcmp(&ha[i], &hb[i], sizeof(T)) != 0;
  std::printf("MISMATCH,%s,%s,%zu of %zu differ\n", variant, what, diff, n);
  return false;
}

struct Shape {
  const char* model;
  int64_t rows, channels;
};

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
  const Shape shapes[] = {
      {"r50", 3211264, 64}, {"r50", 802816, 64},  {"r50", 802816, 256}, {"r50", 802816, 128},
      {"r50", 200704, 128}, {"r50", 200704, 512}, {"r50", 50176, 256},  {"r50", 50176, 1024},
      {"r50", 12544, 512},  {"r50", 12544, 2048}, {"r18", 524288, 64},  {"r18", 131072, 128},
      {"r18", 32768, 256},  {"r18", 8192, 512},   {"fm18", 401408, 64}, {"fm18", 25088, 512}};
  int sms = 0;
  HG_GPU_CHECK(gpuDeviceGetAttribute(&sms, gpuDevAttrMultiProcessorCount, 0));
  gpuStream_t s;
  HG_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  bool all_same = true;
  std::printf("model,rows,channels,variant,us,bytes_moved_mb,gb_per_s\n");
  for (const Shape& sh : shapes) {
    using T = bf16;
    const int64_t n = sh.rows * sh.channels, c = sh.channels;
    std::vector<uint16_t> hx(static_cast<size_t>(n)), hdy(hx.size()), hr(hx.size());
    for (auto& v : hx) v = to_bf16_bits(3.0f * uniform() - 1.0f);
    for (auto& v : hdy) v = to_bf16_bits(uniform() - 0.5f);
    for (auto& v : hr) v = to_bf16_bits(uniform() - 0.7f);
    std::vector<float> hw(static_cast<size_t>(c)), hb(hw.size()), zeros(hw.size(), 0.0f),
        ones(hw.size(), 1.0f);
    for (auto& v : hw) v = 0.5f + uniform();
    for (auto& v : hb) v = uniform() - 0.5f;
    T* x = reinterpret_cast<T*>(device_copy(hx));
    T* dy = reinterpret_cast<T*>(device_copy(hdy));
    T* res = reinterpret_cast<T*>(device_copy(hr));
    T *y, *yres, *dx, *dx2, *dres;
    for (T** p : {&y, &yres, &dx, &dx2, &dres}) HG_GPU_CHECK(gpuMalloc(p, n * 2));
    float* w = device_copy(hw);
    float* b = device_copy(hb);
    float* rm = device_copy(zeros);
    float* rv = device_copy(ones);
    float *mean, *invstd, *mean2, *invstd2, *dw, *db, *dw2, *db2;
    for (float** p : {&mean, &invstd, &mean2, &invstd2, &dw, &db, &dw2, &db2})
      HG_GPU_CHECK(gpuMalloc(p, c * 4));
    const uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(x)) |
                          reinterpret_cast<uintptr_t>(res) | reinterpret_cast<uintptr_t>(dy);
    const BatchNormPlan plan = batch_norm_plan(sh.rows, c, DType::BF16, bits, sms);
    uint8_t *mask = nullptr, *mask_res = nullptr;
    HG_GPU_CHECK(gpuMalloc(&mask, sh.rows * relu_mask_stride(c)));
    HG_GPU_CHECK(gpuMalloc(&mask_res, sh.rows * relu_mask_stride(c)));
    float* ws = nullptr;
    HG_GPU_CHECK(gpuMalloc(&ws, batch_norm_workspace_floats(plan, c) * 4));
    float* ws_b = ws + plan.row_blocks * c;
    unsigned* counters = nullptr;
    HG_GPU_CHECK(gpuMalloc(&counters, plan.columns * 4));
    HG_GPU_CHECK(gpuMemsetAsync(counters, 0, plan.columns * 4, s));
    const dim3 grid(unsigned(plan.columns), unsigned(plan.row_blocks)), block = block_of(plan);
    const double mb = double(n) * 2 / 1e6;
    auto row = [&](const char* variant, double us, double tensors) {
      std::printf("%s,%lld,%lld,%s,%.1f,%.1f,%.0f\n", sh.model, (long long)sh.rows, (long long)c,
                  variant, us, tensors * mb, tensors * mb * 1e3 / us);
    };

    // The ceiling: a copy of the tensor (read + write).
    row("copy",
        time_us(s, repeats,
                [&] {
                  copy_kernel<<<unsigned(4 * sms), 512, 0, s>>>(
                      reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(dx), n * 2 / 16);
                }),
        2);
    // Forward: the library's fused train (stats + normalise + ReLU), without and with residual.
    auto fwd = [&](const T* r, T* out) {
      batch_norm_relu_train_launch(plan, DType::BF16, x, r, out, r ? mask_res : mask, sh.rows, c, w,
                                   b, rm, rv, 0.1, 1e-5, mean, invstd, ws, s);
    };
    row("fwd_lib", time_us(s, repeats, [&] { fwd(nullptr, y); }), 3);
    row("fwd_lib_res", time_us(s, repeats, [&] { fwd(res, yres); }), 4);
    HG_GPU_CHECK(gpuStreamSynchronize(s));
    // The statistics alone.
    row("stats_lib",
        time_us(s, repeats,
                [&] {
                  launch_batch_norm_stats<T, 8>(plan, x, sh.rows, c, rm, rv, 0.1, 1e-5, mean2,
                                                invstd2, ws, s);
                }),
        1);
    HG_GPU_CHECK(gpuStreamSynchronize(s));
    // Backward without residual: the library's (the forward's mask bits) and the mask
    // recomputed from x.
    auto bwd_lib = [&](T* dres_out) {
      batch_norm_relu_backward_launch(plan, DType::BF16, dy, nullptr, dres_out ? mask_res : mask, x,
                                      dx, dres_out, sh.rows, c, w, mean, invstd, dw, db, ws,
                                      counters, s);
    };
    row("bwd_lib_bits", time_us(s, repeats, [&] { bwd_lib(nullptr); }), 5.125);
    auto bwd_mask_x = [&] {
      grad_sums_mask_x<T, 8><<<grid, block, 0, s>>>(dy, x, sh.rows, c, plan.rows_per_block, mean,
                                                    invstd, w, b, dw2, db2, ws, ws_b, counters);
      input_grad_mask_x<T, 8><<<grid, block, 0, s>>>(dy, x, dx2, sh.rows, c, plan.rows_per_block, w,
                                                     b, mean, invstd, dw2, db2);
    };
    row("bwd_mask_x", time_us(s, repeats, bwd_mask_x), 5);
    HG_GPU_CHECK(gpuStreamSynchronize(s));
    bwd_lib(nullptr);
    bwd_mask_x();
    HG_GPU_CHECK(gpuStreamSynchronize(s));
    all_same &= same_bits(dx, dx2, size_t(n), "dx", "bwd_mask_x");
    all_same &= same_bits(dw, dw2, size_t(c), "dweight", "bwd_mask_x");
    all_same &= same_bits(db, db2, size_t(c), "dbias", "bwd_mask_x");
    // Backward with the residual gradient (the library stores dz in the sums pass).
    row("bwd_lib_bits_res", time_us(s, repeats, [&] { bwd_lib(dres); }), 6.125);
    for (void* p :
         {(void*)x,    (void*)dy,     (void*)res,   (void*)y,        (void*)yres, (void*)dx,
          (void*)dx2,  (void*)dres,   (void*)w,     (void*)b,        (void*)rm,   (void*)rv,
          (void*)mean, (void*)invstd, (void*)mean2, (void*)invstd2,  (void*)dw,   (void*)db,
          (void*)dw2,  (void*)db2,    (void*)ws,    (void*)counters, (void*)mask, (void*)mask_res})
      HG_GPU_CHECK(gpuFree(p));
  }
  std::printf("bitwise,%s\n", all_same ? "all variants identical to the library" : "MISMATCH");
  return all_same ? 0 : 1;
}
