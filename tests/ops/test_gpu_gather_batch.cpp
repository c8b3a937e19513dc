// gather_batch on the GPU against the CPU backend on random datasets, indices and
// augmentations (shifts inside and beyond the padding, flips, cutout boxes empty or not), and
// without indices and labels (a uint8 batch normalised, as DataLoader::model_images does):
// labels and images identical bit for bit, and without a table the pixel values; mix_batch
// (mixup, cutmix, none) and augment_images likewise. Outputs start poisoned (NaN), so an
// unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "hourglass/ops/ops.h"
#include "support/gpu.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/gpu_allocator.h"
#endif

namespace hg {
namespace {

TEST(GpuGatherBatch, MatchesTheCpuOnRandomBatches) {
  HG_REQUIRE_GPU();
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);
#endif
  std::mt19937 rng(17);
  struct Shape4 {
    int64_t n, h, w, c;
  };
  for (const Shape4 s : {Shape4{50, 32, 32, 3}, Shape4{9, 28, 28, 1}, Shape4{5, 7, 13, 4}}) {
    for (int64_t batch : {int64_t(1), int64_t(37), int64_t(256)}) {
      SCOPED_TRACE(testing::Message() << "dataset " << s.n << "x" << s.h << "x" << s.w << "x" << s.c
                                      << " batch " << batch);
      std::vector<uint8_t> pixels(size_t(s.n * s.h * s.w * s.c)), labels(size_t(s.n));
      for (auto& p : pixels) p = uint8_t(rng() % 256);
      for (auto& l : labels) l = uint8_t(rng() % 100);
      std::vector<int64_t> indices(static_cast<size_t>(batch));
      std::vector<int32_t> augment(static_cast<size_t>(7 * batch));
      for (int64_t b = 0; b < batch; ++b) {
        indices[size_t(b)] = int64_t(rng() % uint32_t(s.n));
        int32_t* a = augment.data() + 7 * b;
        a[0] = int32_t(rng() % 13) - 6;
        a[1] = int32_t(rng() % 13) - 6;
        a[2] = int32_t(rng() % 2);
        // A cutout box within the image ([y0, y1) x [x0, x1), possibly empty).
        a[3] = int32_t(rng() % uint32_t(s.h + 1));
        a[4] = int32_t(rng() % uint32_t(s.w + 1));
        a[5] = a[3] + int32_t(rng() % uint32_t(s.h + 1 - a[3]));
        a[6] = a[4] + int32_t(rng() % uint32_t(s.w + 1 - a[4]));
      }
      std::vector<float> table;
      for (int64_t i = 0; i < s.c * 256; ++i) table.push_back(float(rng() % 10000) * 1e-3f - 5.0f);
      const Tensor images = Tensor::from_vector(pixels, {s.n, s.h, s.w, s.c});
      const Tensor label_t = Tensor::from_vector(labels, {s.n});
      const Tensor idx = Tensor::from_vector(indices, {batch});
      const Tensor aug = Tensor::from_vector(augment, {batch, 7});
      const Tensor tab = Tensor::from_vector(table, {s.c, 256});
      const Device g = Device::gpu(0);
      auto expect_same = [](const ops::GatheredBatch& gpu, const ops::GatheredBatch& cpu) {
        ASSERT_EQ(gpu.images.device(), Device::gpu(0));
        ASSERT_EQ(gpu.labels.defined(), cpu.labels.defined());
        if (cpu.labels.defined())
          ASSERT_EQ(gpu.labels.to_vector<int64_t>(), cpu.labels.to_vector<int64_t>());
        const std::vector<float> want = cpu.images.to_vector<float>();
        const std::vector<float> got = gpu.images.to_vector<float>();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
      };
      for (bool augmented : {false, true}) {
        const auto cpu = ops::gather_batch(images, label_t, idx, augmented ? aug : Tensor(), tab);
        const auto gpu = ops::gather_batch(images.to(g), label_t.to(g), idx.to(g),
                                           augmented ? aug.to(g) : Tensor(), tab.to(g));
        expect_same(gpu, cpu);
      }
      // The dataset as a uint8 batch: every image in order, no labels.
      expect_same(ops::gather_batch(images.to(g), Tensor(), Tensor(), Tensor(), tab.to(g)),
                  ops::gather_batch(images, Tensor(), Tensor(), Tensor(), tab));
      // Without a table: the pixel values.
      const auto cpu_u8 = ops::gather_batch(images, label_t, idx, aug, Tensor());
      const auto gpu_u8 =
          ops::gather_batch(images.to(g), label_t.to(g), idx.to(g), aug.to(g), Tensor());
      ASSERT_EQ(gpu_u8.images.dtype(), DType::U8);
      ASSERT_EQ(gpu_u8.images.to_vector<uint8_t>(), cpu_u8.images.to_vector<uint8_t>());
      ASSERT_EQ(gpu_u8.labels.to_vector<int64_t>(), cpu_u8.labels.to_vector<int64_t>());
    }
  }
}

TEST(GpuMixBatch, MatchesTheCpuBitForBit) {
  HG_REQUIRE_GPU();
#ifdef HOURGLASS_HAS_GPU
  gpu::set_poison(true);
#endif
  std::mt19937 rng(23);
  const Device g = Device::gpu(0);
  for (const int64_t n : {int64_t(1), int64_t(7), int64_t(512)}) {
    const int64_t h = 28, w = 28, c = 1 + n % 3;
    std::vector<float> pixels;
    for (int64_t i = 0; i < n * h * w * c; ++i)
      pixels.push_back(float(rng() % 20001) * 1e-4f - 1.0f);
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < n; ++i) labels.push_back(int64_t(rng() % 10));
    const Tensor images = Tensor::from_vector(pixels, {n, h, w, c});
    const Tensor label_t = Tensor::from_vector(labels, {n});
    for (const std::vector<float>& p :
         {std::vector<float>{0.37f, 0.37f, 0, 0, 0, 0}, std::vector<float>{1, 0, 3, 5, 20, 17},
          std::vector<float>{1, 1, 0, 0, 0, 0}}) {
      const Tensor params = Tensor::from_vector(p, {6});
      const ops::GatheredBatch cpu = ops::mix_batch(images, label_t, params);
      const ops::GatheredBatch gpu = ops::mix_batch(images.to(g), label_t.to(g), params.to(g));
      ASSERT_EQ(gpu.images.device(), g);
      ASSERT_EQ(gpu.labels.to_vector<int64_t>(), cpu.labels.to_vector<int64_t>());
      const std::vector<float> want = cpu.images.to_vector<float>();
      const std::vector<float> got = gpu.images.to_vector<float>();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "n " << n << " element " << i;
    }
  }
}

// augment_images on the GPU against the CPU, bit for bit: random programs of up to 6 rows of
// every kind (random affine matrices, factors either side of 1, bits, thresholds, hue shifts)
// over random 28x28x1 and 32x32x3 images and a 3x70 strip (sharpness's border only), in
// batches of 1, 37 and 300.
TEST(GpuAugmentImages, MatchesTheCpuBitForBit) {
  HG_REQUIRE_GPU();
  std::mt19937 rng(31);
  const Device g = Device::gpu(0);
  auto uniform = [&](float lo, float hi) { return lo + (hi - lo) * float(rng() % 100001) * 1e-5f; };
  struct Shape3 {
    int64_t h, w, c;
  };
  for (const Shape3 s : {Shape3{28, 28, 1}, Shape3{32, 32, 3}, Shape3{3, 70, 3}})
    for (const int64_t batch : {int64_t(1), int64_t(37), int64_t(300)}) {
      SCOPED_TRACE(testing::Message() << s.h << "x" << s.w << "x" << s.c << " batch " << batch);
      const int64_t rows = 6;
      std::vector<uint8_t> pixels(size_t(batch * s.h * s.w * s.c));
      for (auto& p : pixels) p = uint8_t(rng() % 256);
      std::vector<float> program;
      for (int64_t r = 0; r < batch * rows; ++r) {
        std::vector<float> row(kImageOpWidth, 0.0f);
        row[0] = float(rng() % kImageOpKinds);
        switch (ImageOpKind(int32_t(row[0]))) {
          case ImageOpKind::Affine:
            for (int k = 1; k <= 6; ++k) row[size_t(k)] = uniform(-1.2f, 1.2f);
            break;
          case ImageOpKind::Posterize: row[1] = float(rng() % 9); break;
          case ImageOpKind::Solarize: row[1] = uniform(0.0f, 256.0f); break;
          case ImageOpKind::Hue: row[1] = uniform(-0.5f, 0.5f); break;
          default: row[1] = uniform(0.0f, 2.0f); row[2] = float(1.0 - double(row[1]));
        }
        program.insert(program.end(), row.begin(), row.end());
      }
      const Tensor images = Tensor::from_vector(pixels, {batch, s.h, s.w, s.c});
      const Tensor prog = Tensor::from_vector(program, {batch, rows, kImageOpWidth});
      const Tensor cpu = ops::augment_images(images, prog);
      const Tensor gpu = ops::augment_images(images.to(g), prog.to(g));
      ASSERT_EQ(gpu.device(), g);
      const std::vector<uint8_t> want = cpu.to_vector<uint8_t>(), got = gpu.to_vector<uint8_t>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(int(got[i]), int(want[i]))
            << "element " << i << " of image " << int64_t(i) / (s.h * s.w * s.c);
    }
}

}  // namespace
}  // namespace hg
