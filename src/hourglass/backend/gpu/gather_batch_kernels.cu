// The training batch's kernels. Batch gathering: one thread per output pixel (all its
// channels), in a grid-stride loop; values are looked up in the normalisation table (a few KiB,
// cached), so they are the CPU's bits, or written as the pixel values without a table. Batch
// mixing: one thread per element, fmaf as the CPU's std::fma, so again the CPU's bits.
#include <cstdint>

#include "hourglass/backend/gpu/gather_batch_kernels.h"
#include "hourglass/backend/gpu/kernel_util.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

// Out is float (values from the table) or uint8_t (the pixel values themselves, table null).
template <typename Out>
__global__ void __launch_bounds__(kThreads)
    gather_batch_kernel(const uint8_t* __restrict__ images, const uint8_t* __restrict__ labels,
                        const int64_t* __restrict__ indices, const int32_t* __restrict__ augment,
                        const float* __restrict__ table, int64_t n, int64_t h, int64_t w, int64_t c,
                        int64_t pixels, Out* __restrict__ out, int64_t* __restrict__ out_labels) {
  // Channel ch's output for pixel value v.
  auto value = [table](int64_t ch, uint8_t v) -> Out {
    if constexpr (sizeof(Out) == 1) {
      (void)table;
      return v;
    } else {
      return table[ch * 256 + v];
    }
  };
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pixels; p += stride) {
    const int64_t x = p % w, y = (p / w) % h, b = p / (w * h);
    const int64_t index = indices != nullptr ? indices[b] : b;
    const bool valid = index >= 0 && index < n;
    if (x == 0 && y == 0 && out_labels != nullptr)
      out_labels[b] = valid ? int64_t(labels[index]) : -1;
    Out* px = out + p * c;
    if (!valid) {
      for (int64_t ch = 0; ch < c; ++ch) px[ch] = Out(0);
      continue;
    }
    int64_t sy = y, sx = x;
    bool cut = false;
    if (augment != nullptr) {
      const int32_t* a = augment + 7 * b;
      sy = y + a[0];
      sx = (a[2] != 0 ? w - 1 - x : x) + a[1];
      cut = y >= a[3] && y < a[5] && x >= a[4] && x < a[6];  // the cutout box
    }
    if (cut || sy < 0 || sy >= h || sx < 0 || sx >= w) {  // padding or cutout: a zero pixel
      for (int64_t ch = 0; ch < c; ++ch) px[ch] = value(ch, 0);
      continue;
    }
    const uint8_t* sp = images + ((index * h + sy) * w + sx) * c;
    for (int64_t ch = 0; ch < c; ++ch) px[ch] = value(ch, sp[ch]);
  }
}

__global__ void __launch_bounds__(kThreads)
    mix_batch_kernel(const float* __restrict__ images, const int64_t* __restrict__ labels,
                     const float* __restrict__ params, int64_t n, int64_t h, int64_t w, int64_t c,
                     int64_t elements, float* __restrict__ out, int64_t* __restrict__ out_labels) {
  const float outside = params[0], inside = params[1];
  const float y0 = params[2], x0 = params[3], y1 = params[4], x1 = params[5];
  const int64_t image = h * w * c;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < elements; e += stride) {
    const int64_t b = e / image, within = e % image;
    const float y = float(within / (w * c)), x = float((within / c) % w);
    if (within == 0) out_labels[b] = labels[n - 1 - b];
    const bool in = y >= y0 && y < y1 && x >= x0 && x < x1;
    const float t = in ? inside : outside, u = 1.0f - t;
    out[e] = fmaf(t, images[e], __fmul_rn(u, images[(n - 1 - b) * image + within]));
  }
}

}  // namespace

void launch_mix_batch(const float* images, const int64_t* labels, const float* params, int64_t n,
                      int64_t h, int64_t w, int64_t c, float* out_images, int64_t* out_labels,
                      gpuStream_t stream) {
  const int64_t elements = n * h * w * c;
  if (elements == 0) return;
  mix_batch_kernel<<<grid_for(elements, kThreads), kThreads, 0, stream>>>(
      images, labels, params, n, h, w, c, elements, out_images, out_labels);
  HG_GPU_CHECK_LAUNCH();
}

void launch_gather_batch(const uint8_t* images, const uint8_t* labels, const int64_t* indices,
                         const int32_t* augment, const float* table, int64_t n, int64_t h,
                         int64_t w, int64_t c, int64_t batch, void* out_images, int64_t* out_labels,
                         gpuStream_t stream) {
  const int64_t pixels = batch * h * w;
  if (pixels == 0) return;
  if (table != nullptr)
    gather_batch_kernel<float><<<grid_for(pixels, kThreads), kThreads, 0, stream>>>(
        images, labels, indices, augment, table, n, h, w, c, pixels,
        static_cast<float*>(out_images), out_labels);
  else
    gather_batch_kernel<uint8_t><<<grid_for(pixels, kThreads), kThreads, 0, stream>>>(
        images, labels, indices, augment, table, n, h, w, c, pixels,
        static_cast<uint8_t*>(out_images), out_labels);
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
