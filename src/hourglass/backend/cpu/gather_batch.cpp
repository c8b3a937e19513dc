// The training batch's device-side ops on the CPU, the references for the GPU kernels:
// gather_batch (values come from the table, as in data::ImageTransform::apply, so a batch
// gathered here equals the host loader's batch of the same samples and augmentations bit for
// bit) and mix_batch (mixup and cutmix); augment_images is in augment_images.cpp.
#include <cmath>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/base/parallel.h"

namespace hg {

ops::GatheredBatch CpuBackend::gather_batch(const Tensor& images, const Tensor& labels,
                                            const Tensor& indices, const Tensor& augment,
                                            const Tensor& table) {
  const int64_t n = images.size(0), h = images.size(1), w = images.size(2), c = images.size(3);
  const int64_t batch = indices.defined() ? indices.size(0) : n;
  const int64_t* index = indices.defined() ? indices.data<int64_t>() : nullptr;
  for (int64_t b = 0; index != nullptr && b < batch; ++b)
    HG_CHECK(index[b] >= 0 && index[b] < n,
             "gather_batch: indices[{}] = {} is outside the dataset's {} samples", b, index[b], n);
  ops::GatheredBatch out;
  out.images =
      Tensor::empty({batch, h, w, c}, table.defined() ? DType::F32 : DType::U8, images.device());
  if (labels.defined()) out.labels = Tensor::empty({batch}, DType::I64, images.device());
  const uint8_t* src = images.data<uint8_t>();
  const uint8_t* label = labels.defined() ? labels.data<uint8_t>() : nullptr;
  const int32_t* aug = augment.defined() ? augment.data<int32_t>() : nullptr;
  int64_t* dst_label = label != nullptr ? out.labels.data<int64_t>() : nullptr;
  // Writes the batch as T through value(channel, pixel value): the table's floats, or the
  // pixel values themselves without a table.
  auto gather = [&](auto* dst, const auto& value) {
    parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t i = index != nullptr ? index[b] : b;
        const int32_t* a = aug ? aug + 7 * b : nullptr;
        const int64_t shift_y = a ? a[0] : 0, shift_x = a ? a[1] : 0;
        const bool flip = a && a[2] != 0;
        // The cutout box [y0, y1) x [x0, x1); empty without augmentation.
        const int64_t cut_y0 = a ? a[3] : 0, cut_x0 = a ? a[4] : 0;
        const int64_t cut_y1 = a ? a[5] : 0, cut_x1 = a ? a[6] : 0;
        const uint8_t* image = src + i * h * w * c;
        if (label != nullptr) dst_label[b] = label[i];
        for (int64_t y = 0; y < h; ++y) {
          const int64_t sy = y + shift_y;
          for (int64_t x = 0; x < w; ++x) {
            const int64_t sx = (flip ? w - 1 - x : x) + shift_x;
            auto* px = dst + ((b * h + y) * w + x) * c;
            const bool cut = y >= cut_y0 && y < cut_y1 && x >= cut_x0 && x < cut_x1;
            if (cut || sy < 0 || sy >= h || sx < 0 || sx >= w) {  // padding or cutout: a zero pixel
              for (int64_t ch = 0; ch < c; ++ch) px[ch] = value(ch, 0);
              continue;
            }
            const uint8_t* sp = image + (sy * w + sx) * c;
            for (int64_t ch = 0; ch < c; ++ch) px[ch] = value(ch, sp[ch]);
          }
        }
      }
    });
  };
  if (table.defined()) {
    const float* tab = table.data<float>();
    gather(out.images.data<float>(), [tab](int64_t ch, uint8_t v) { return tab[ch * 256 + v]; });
  } else {
    gather(out.images.data<uint8_t>(), [](int64_t, uint8_t v) { return v; });
  }
  return out;
}

ops::GatheredBatch CpuBackend::mix_batch(const Tensor& images, const Tensor& labels,
                                         const Tensor& params) {
  const int64_t n = images.size(0), h = images.size(1), w = images.size(2), c = images.size(3);
  ops::GatheredBatch out;
  out.images = Tensor::empty(images.shape(), DType::F32, images.device());
  out.labels = Tensor::empty({n}, DType::I64, images.device());
  const float* p = params.data<float>();
  const float outside = p[0], inside = p[1];
  const float y0 = p[2], x0 = p[3], y1 = p[4], x1 = p[5];
  const float* src = images.data<float>();
  const int64_t* label = labels.data<int64_t>();
  float* dst = out.images.data<float>();
  int64_t* dst_label = out.labels.data<int64_t>();
  for (int64_t b = 0; b < n; ++b) dst_label[b] = label[n - 1 - b];
  parallel_for(n * h, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {  // r: one image row (b, y)
      const int64_t b = r / h, y = r % h;
      const float* own = src + r * w * c;
      const float* partner = src + ((n - 1 - b) * h + y) * w * c;
      float* o = dst + r * w * c;
      for (int64_t x = 0; x < w; ++x) {
        const bool in = float(y) >= y0 && float(y) < y1 && float(x) >= x0 && float(x) < x1;
        const float t = in ? inside : outside, u = 1.0f - t;
        for (int64_t ch = x * c; ch < (x + 1) * c; ++ch)
          o[ch] = std::fma(t, own[ch], u * partner[ch]);
      }
    }
  });
  return out;
}

}  // namespace hg
