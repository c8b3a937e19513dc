// gather_batch on the CPU: the reference for the GPU kernel. Values come from the table, as in
// data::ImageTransform::apply, so a batch gathered here equals the host loader's batch of the
// same samples and augmentations bit for bit.
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
  out.images = Tensor::empty({batch, h, w, c}, DType::F32, images.device());
  if (labels.defined()) out.labels = Tensor::empty({batch}, DType::I64, images.device());
  const uint8_t* src = images.data<uint8_t>();
  const uint8_t* label = labels.defined() ? labels.data<uint8_t>() : nullptr;
  const int32_t* aug = augment.defined() ? augment.data<int32_t>() : nullptr;
  const float* tab = table.data<float>();
  float* dst = out.images.data<float>();
  int64_t* dst_label = label != nullptr ? out.labels.data<int64_t>() : nullptr;
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
          float* px = dst + ((b * h + y) * w + x) * c;
          const bool cut = y >= cut_y0 && y < cut_y1 && x >= cut_x0 && x < cut_x1;
          if (cut || sy < 0 || sy >= h || sx < 0 || sx >= w) {  // padding or cutout: a zero pixel
            for (int64_t ch = 0; ch < c; ++ch) px[ch] = tab[ch * 256];
            continue;
          }
          const uint8_t* sp = image + (sy * w + sx) * c;
          for (int64_t ch = 0; ch < c; ++ch) px[ch] = tab[ch * 256 + sp[ch]];
        }
      }
    }
  });
  return out;
}

}  // namespace hg
