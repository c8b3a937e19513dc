// gather_batch on the CPU against a reference written from the op's documentation: samples
// picked by index, shifted with zero padding, mirrored after the shift, the cutout box blanked
// in output coordinates, each value looked up in its channel's table (exactly: the op computes
// nothing); labels widened to i64; without indices every image in order, without labels none
// (a uint8 batch normalised). Bad operands are refused naming the operand.
// mix_batch (mixup and cutmix) against a float64 reference of its documented arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "hourglass/base/error.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace hg {
namespace {

struct Data {
  int64_t n = 7, h = 5, w = 6, c = 3;
  std::vector<uint8_t> pixels, labels;
  std::vector<float> table;  // [c, 256], distinct values
  Data() {
    std::mt19937 rng(5);
    for (int64_t i = 0; i < n * h * w * c; ++i) pixels.push_back(uint8_t(rng() % 256));
    for (int64_t i = 0; i < n; ++i) labels.push_back(uint8_t(rng() % 10));
    for (int64_t i = 0; i < c * 256; ++i) table.push_back(float(i) * 0.01f - 3.0f);
  }
  Tensor images() const { return Tensor::from_vector(pixels, {n, h, w, c}); }
  Tensor label_tensor() const { return Tensor::from_vector(labels, {n}); }
  Tensor table_tensor() const { return Tensor::from_vector(table, {c, 256}); }

  // out(b, y, x, ch), from the documentation.
  // `a`: the sample's row of augment (shift_y, shift_x, flip, box y0, x0, y1, x1).
  float reference(int64_t index, const int32_t* a, int64_t y, int64_t x, int64_t ch) const {
    const int64_t sy = y + a[0], sx = (a[2] != 0 ? w - 1 - x : x) + a[1];
    if (y >= a[3] && y < a[5] && x >= a[4] && x < a[6]) return table[size_t(ch * 256)];
    if (sy < 0 || sy >= h || sx < 0 || sx >= w) return table[size_t(ch * 256)];
    return table[size_t(ch * 256 + pixels[size_t(((index * h + sy) * w + sx) * c + ch)])];
  }
};

TEST(GatherBatch, MatchesTheFloat64ReferenceWithAndWithoutAugmentation) {
  const Data d;
  const std::vector<int64_t> indices = {3, 0, 6, 3, 1};
  // Shifts within and beyond the image (a sample wholly in the padding), flips on and off;
  // cutout boxes empty, inside, at a corner, whole rows, the whole image.
  const std::vector<int32_t> augment = {0,  0,  0, 0, 0, 0, 0,   // none
                                        1,  -2, 1, 1, 2, 4, 5,   // rows 1-3, columns 2-4
                                        -3, 2,  0, 0, 4, 2, 6,   // top-right corner
                                        5,  0,  1, 2, 0, 3, 6,   // row 2, in the padding
                                        -1, 6,  1, 0, 0, 5, 6};  // everything
  const int64_t b = int64_t(indices.size());
  const std::vector<int32_t> none(7, 0);
  for (bool augmented : {false, true}) {
    SCOPED_TRACE(augmented ? "augmented" : "plain");
    const Tensor aug = augmented ? Tensor::from_vector(augment, {b, 7}) : Tensor();
    const auto out = ops::gather_batch(d.images(), d.label_tensor(),
                                       Tensor::from_vector(indices, {b}), aug, d.table_tensor());
    ASSERT_EQ(out.images.shape(), (Shape{b, d.h, d.w, d.c}));
    ASSERT_EQ(out.images.dtype(), DType::F32);
    ASSERT_EQ(out.labels.dtype(), DType::I64);
    const std::vector<float> got = out.images.to_vector<float>();
    const std::vector<int64_t> labels = out.labels.to_vector<int64_t>();
    for (int64_t i = 0; i < b; ++i) {
      EXPECT_EQ(labels[size_t(i)], d.labels[size_t(indices[size_t(i)])]);
      const int32_t* a = augmented ? augment.data() + 7 * i : none.data();
      for (int64_t y = 0; y < d.h; ++y)
        for (int64_t x = 0; x < d.w; ++x)
          for (int64_t ch = 0; ch < d.c; ++ch) {
            const float want = d.reference(indices[size_t(i)], a, y, x, ch);
            ASSERT_EQ(got[size_t(((i * d.h + y) * d.w + x) * d.c + ch)], want)
                << "sample " << i << " y " << y << " x " << x << " channel " << ch;
          }
    }
  }
}

// Undefined indices: every image in order (what DataLoader::model_images normalises a uint8
// batch with); undefined labels: undefined labels out.
TEST(GatherBatch, WithoutIndicesTakesEveryImageInOrder) {
  const Data d;
  const std::vector<int32_t> augment = {0,  0,  0, 0, 0, 0, 0,   // none
                                        1,  -2, 1, 1, 2, 4, 5,   // shifted, flipped, cut
                                        2,  1,  0, 0, 0, 0, 0,   // shifted
                                        -1, 6,  1, 0, 0, 5, 6,   // all cut
                                        0,  0,  1, 2, 1, 4, 3,   // flipped, cut
                                        3,  3,  0, 0, 0, 0, 0,   // shifted
                                        0,  0,  0, 5, 5, 5, 5};  // an empty cutout box
  const std::vector<int32_t> none(7, 0);
  for (bool augmented : {false, true}) {
    SCOPED_TRACE(augmented ? "augmented" : "plain");
    const Tensor aug = augmented ? Tensor::from_vector(augment, {d.n, 7}) : Tensor();
    const auto out = ops::gather_batch(d.images(), Tensor(), Tensor(), aug, d.table_tensor());
    ASSERT_EQ(out.images.shape(), (Shape{d.n, d.h, d.w, d.c}));
    EXPECT_FALSE(out.labels.defined());
    const std::vector<float> got = out.images.to_vector<float>();
    for (int64_t i = 0; i < d.n; ++i) {
      const int32_t* a = augmented ? augment.data() + 7 * i : none.data();
      for (int64_t y = 0; y < d.h; ++y)
        for (int64_t x = 0; x < d.w; ++x)
          for (int64_t ch = 0; ch < d.c; ++ch)
            ASSERT_EQ(got[size_t(((i * d.h + y) * d.w + x) * d.c + ch)],
                      d.reference(i, a, y, x, ch))
                << "sample " << i << " y " << y << " x " << x << " channel " << ch;
    }
  }
  // Labels without indices: each image's own.
  const auto labelled =
      ops::gather_batch(d.images(), d.label_tensor(), Tensor(), Tensor(), d.table_tensor());
  std::vector<int64_t> want(d.labels.begin(), d.labels.end());
  EXPECT_EQ(labelled.labels.to_vector<int64_t>(), want);
}

TEST(GatherBatch, AnEmptyBatchIsEmpty) {
  const Data d;
  const auto out = ops::gather_batch(d.images(), d.label_tensor(), Tensor::empty({0}, DType::I64),
                                     Tensor(), d.table_tensor());
  EXPECT_EQ(out.images.shape(), (Shape{0, d.h, d.w, d.c}));
  EXPECT_EQ(out.labels.numel(), 0);
}

TEST(GatherBatch, BadOperandsAreRefusedNamingThem) {
  const Data d;
  const Tensor idx = Tensor::from_vector<int64_t>({0, 1}, {2});
  auto call = [&](const Tensor& images, const Tensor& labels, const Tensor& indices,
                  const Tensor& augment, const Tensor& table) {
    ops::gather_batch(images, labels, indices, augment, table);
  };
  test::expect_invalid(
      [&] { call(d.images().to(DType::F32), d.label_tensor(), idx, {}, d.table_tensor()); },
      {"gather_batch", "images"});
  test::expect_invalid(
      [&] { call(d.images(), Tensor::from_vector<uint8_t>({1}, {1}), idx, {}, d.table_tensor()); },
      {"gather_batch", "1 labels for 7 images"});
  test::expect_invalid(
      [&] {
        call(d.images(), d.label_tensor(), Tensor::from_vector<int64_t>({0, 7}, {2}), {},
             d.table_tensor());
      },
      {"gather_batch", "indices[1] = 7", "7 samples"});
  test::expect_invalid(
      [&] {
        call(d.images(), d.label_tensor(), idx, Tensor::zeros({2, 3}, DType::I32),
             d.table_tensor());
      },
      {"gather_batch", "augment must be [2,7]"});
  test::expect_invalid(  // without indices, a row per image
      [&] {
        call(d.images(), {}, {}, Tensor::zeros({2, 7}, DType::I32), d.table_tensor());
      },
      {"gather_batch", "augment must be [7,7]"});
  test::expect_invalid(
      [&] {
        call(d.images(), d.label_tensor(), idx, {}, Tensor::zeros({3, 255}));
      },
      {"gather_batch", "table must be [3,256]"});
}

// mix_batch: row b with row n-1-b, the inside weight in the box and the outside one elsewhere;
// the float64 value of t * own + (1 - t) * partner within a float's rounding (the op's fma
// rounds twice), and exactly the own or the partner's value where t is 1 or 0.
TEST(MixBatch, MatchesTheFloat64ReferenceForMixupAndCutmix) {
  const int64_t n = 5, h = 4, w = 6, c = 3;
  std::mt19937 rng(11);
  std::vector<float> pixels;
  for (int64_t i = 0; i < n * h * w * c; ++i) pixels.push_back(float(rng() % 2001) * 1e-3f - 1.0f);
  const std::vector<int64_t> labels{3, 1, 4, 1, 5};
  const Tensor images = Tensor::from_vector(pixels, {n, h, w, c});
  const Tensor label_t = Tensor::from_vector(labels, {n});
  struct Case {
    std::vector<float> params;  // outside, inside, y0, x0, y1, x1
    bool exact;
  };
  for (const Case& k : {Case{{0.3f, 0.3f, 0, 0, 0, 0}, false},     // mixup
                        Case{{1.0f, 0.0f, 1, 2, 3, 5}, true},      // cutmix
                        Case{{1.0f, 1.0f, 0, 0, 0, 0}, true},      // no mixing
                        Case{{0.8f, 0.1f, 0, 0, 4, 6}, false}}) {  // a box over everything
    SCOPED_TRACE(testing::Message() << "params " << k.params[0] << " " << k.params[1]);
    const ops::GatheredBatch out =
        ops::mix_batch(images, label_t, Tensor::from_vector(k.params, {6}));
    EXPECT_EQ(out.labels.to_vector<int64_t>(), (std::vector<int64_t>{5, 1, 4, 1, 3}));
    ASSERT_EQ(out.images.shape(), images.shape());
    const std::vector<float> got = out.images.to_vector<float>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          for (int64_t ch = 0; ch < c; ++ch) {
            const bool in =
                y >= k.params[2] && y < k.params[4] && x >= k.params[3] && x < k.params[5];
            const double t = in ? k.params[1] : k.params[0];
            const double own = pixels[size_t(((b * h + y) * w + x) * c + ch)];
            const double partner = pixels[size_t((((n - 1 - b) * h + y) * w + x) * c + ch)];
            const double want = t * own + (1.0 - t) * partner;
            const double g = got[size_t(((b * h + y) * w + x) * c + ch)];
            if (k.exact)
              ASSERT_EQ(g, want) << b << "," << y << "," << x << "," << ch;
            else
              ASSERT_NEAR(g, want, 3e-7 * (std::abs(own) + std::abs(partner)) + 1e-12)
                  << b << "," << y << "," << x << "," << ch;
          }
  }
}

TEST(MixBatch, BadOperandsAreRefusedNamingThem) {
  const Tensor images = Tensor::zeros({2, 3, 3, 1}, DType::F32);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1}, {2});
  const Tensor params = Tensor::zeros({6}, DType::F32);
  test::expect_invalid([&] { ops::mix_batch(images.to(DType::F64), labels, params); },
                       {"mix_batch", "images"});
  test::expect_invalid(
      [&] { ops::mix_batch(images, Tensor::from_vector<int64_t>({0}, {1}), params); },
      {"mix_batch", "1 labels for 2 images"});
  test::expect_invalid([&] { ops::mix_batch(images, labels, Tensor::zeros({4}, DType::F32)); },
                       {"mix_batch", "params must be [6]"});
}

}  // namespace
}  // namespace hg
