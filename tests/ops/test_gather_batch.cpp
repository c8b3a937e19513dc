// gather_batch on the CPU against a reference written from the op's documentation: samples
// picked by index, shifted with zero padding, mirrored after the shift, the cutout box blanked
// in output coordinates, each value looked up in its channel's table (exactly: the op computes
// nothing); labels widened to i64; without indices every image in order, without labels none
// (a uint8 batch normalised). Bad operands are refused naming the operand.
// mix_batch (mixup and cutmix) against a float64 reference of its documented arithmetic.
// augment_images against a float64 transcription of torchvision's functions (the ops' own f32
// rounding then moves a truncated value by at most one level), and gather_batch without a table
// gives the pixel values.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
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

// ---- augment_images ----

// Image b's values after one op of `row`, in float64 from torchvision's definitions
// (transforms/functional_tensor.py), truncated to uint8 as torch's casts truncate.
std::vector<double> augment_reference(const std::vector<uint8_t>& img, int64_t h, int64_t w,
                                      int64_t c, const std::array<float, 8>& row) {
  const int64_t pixels = h * w, n = pixels * c;
  std::vector<double> v(img.begin(), img.end()), out = v;
  const auto kind = ImageOpKind(int32_t(row[0]));
  const double f = row[1];
  auto trunc8 = [](double x) { return std::trunc(std::clamp(x, 0.0, 255.0)); };
  auto gray = [&](int64_t q) {
    return c == 3 ? trunc8(0.2989 * v[size_t(q * 3)] + 0.587 * v[size_t(q * 3 + 1)] +
                           0.114 * v[size_t(q * 3 + 2)])
                  : v[size_t(q)];
  };
  switch (kind) {
    case ImageOpKind::Affine:  // the grid of the rescaled matrix, nearest pixel
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const double bx = double(x) - w / 2.0 + 0.5, by = double(y) - h / 2.0 + 0.5;
          const double gx = bx * row[1] + by * row[2] + row[3];
          const double gy = bx * row[4] + by * row[5] + row[6];
          const double ix = std::nearbyint((gx + 1) * w / 2.0 - 0.5);
          const double iy = std::nearbyint((gy + 1) * h / 2.0 - 0.5);
          const bool in = ix >= 0 && ix < double(w) && iy >= 0 && iy < double(h);
          for (int64_t ch = 0; ch < c; ++ch)
            out[size_t((y * w + x) * c + ch)] =
                in ? v[size_t((int64_t(iy) * w + int64_t(ix)) * c + ch)] : 0.0;
        }
      break;
    case ImageOpKind::Brightness:
      for (int64_t e = 0; e < n; ++e) out[size_t(e)] = trunc8(f * v[size_t(e)]);
      break;
    case ImageOpKind::Saturation:
      if (c == 3)
        for (int64_t e = 0; e < n; ++e)
          out[size_t(e)] = trunc8(f * v[size_t(e)] + (1 - f) * gray(e / 3));
      break;
    case ImageOpKind::Contrast: {
      double mean = 0;
      for (int64_t q = 0; q < pixels; ++q) mean += gray(q);
      mean /= double(pixels);
      for (int64_t e = 0; e < n; ++e) out[size_t(e)] = trunc8(f * v[size_t(e)] + (1 - f) * mean);
      break;
    }
    case ImageOpKind::Sharpness:
      for (int64_t e = 0; e < n; ++e) {
        const int64_t q = e / c, x = q % w, y = q / w;
        double smooth = v[size_t(e)];
        if (y > 0 && x > 0 && y < h - 1 && x < w - 1) {
          double sum = 4 * v[size_t(e)];
          for (int64_t dy = -1; dy <= 1; ++dy)
            for (int64_t dx = -1; dx <= 1; ++dx) sum += v[size_t(e + (dy * w + dx) * c)];
          smooth = std::nearbyint(sum / 13.0);
        }
        out[size_t(e)] = trunc8(f * v[size_t(e)] + (1 - f) * smooth);
      }
      break;
    case ImageOpKind::Posterize:
      for (int64_t e = 0; e < n; ++e) {
        const double step = std::exp2(8 - f);
        out[size_t(e)] = std::floor(v[size_t(e)] / step) * step;
      }
      break;
    case ImageOpKind::Solarize:
      for (int64_t e = 0; e < n; ++e)
        out[size_t(e)] = v[size_t(e)] >= f ? 255 - v[size_t(e)] : v[size_t(e)];
      break;
    case ImageOpKind::AutoContrast:
      for (int64_t ch = 0; ch < c; ++ch) {
        double lo = 255, hi = 0;
        for (int64_t q = 0; q < pixels; ++q) {
          lo = std::min(lo, v[size_t(q * c + ch)]);
          hi = std::max(hi, v[size_t(q * c + ch)]);
        }
        for (int64_t q = 0; q < pixels; ++q)
          if (hi > lo)
            out[size_t(q * c + ch)] = trunc8((v[size_t(q * c + ch)] - lo) * 255 / (hi - lo));
      }
      break;
    case ImageOpKind::Equalize:  // PIL's: the cumulative histogram over a step
      for (int64_t ch = 0; ch < c; ++ch) {
        std::vector<int64_t> hist(256, 0);
        for (int64_t q = 0; q < pixels; ++q) ++hist[size_t(v[size_t(q * c + ch)])];
        int64_t last = 0;
        for (int64_t k = 0; k < 256; ++k) last = hist[size_t(k)] != 0 ? hist[size_t(k)] : last;
        const int64_t step = (pixels - last) / 255;
        if (step == 0) continue;
        for (int64_t q = 0; q < pixels; ++q) {
          int64_t below = 0;
          for (int64_t k = 0; k < int64_t(v[size_t(q * c + ch)]); ++k) below += hist[size_t(k)];
          out[size_t(q * c + ch)] = double(std::min<int64_t>((below + step / 2) / step, 255));
        }
      }
      break;
    case ImageOpKind::Hue:
      if (c != 3) break;
      for (int64_t q = 0; q < pixels; ++q) {
        const double r = v[size_t(q * 3)] / 255, g = v[size_t(q * 3 + 1)] / 255,
                     b = v[size_t(q * 3 + 2)] / 255;
        const double mx = std::max({r, g, b}), mn = std::min({r, g, b}), d = mx - mn;
        double hue = 0;
        if (d > 0) {
          if (mx == r)
            hue = (g - b) / d;
          else if (mx == g)
            hue = 2 + (b - r) / d;
          else
            hue = 4 + (r - g) / d;
        }
        hue = std::fmod(hue / 6 + 1, 1.0);
        hue = hue + f - std::floor(hue + f);
        const double s = mx > 0 ? d / mx : 0, h6 = hue * 6, i = std::floor(h6), fr = h6 - i;
        const double p = mx * (1 - s), qq = mx * (1 - s * fr), t = mx * (1 - s * (1 - fr));
        const double rgb[6][3] = {{mx, t, p},  {qq, mx, p}, {p, mx, t},
                                  {p, qq, mx}, {t, p, mx},  {mx, p, qq}};
        for (int ch = 0; ch < 3; ++ch)
          out[size_t(q * 3 + ch)] = trunc8(rgb[int64_t(i) % 6][ch] * 255);
      }
      break;
    case ImageOpKind::None: break;
  }
  return out;
}

// Every kind on random 1- and 3-channel images against the float64 reference: at most one
// level apart (the ops' f32 products truncate either side of an integer that the reference
// hits exactly: up to 14% of values) and on at most a quarter of them (rounding in place of
// truncation moves half of them); the integer ops (posterize, solarize, equalize)
// and resampling with an exact matrix (a translation, a quarter turn) exactly. A program's
// rows run in order; saturation and hue leave one channel alone.
TEST(AugmentImages, MatchesTheFloat64Reference) {
  std::mt19937 rng(23);
  for (const int64_t c : {int64_t(1), int64_t(3)}) {
    const int64_t h = 8, w = 16, n = h * w * c;  // halves of powers of two: exact matrices
    std::vector<uint8_t> img(static_cast<size_t>(n));
    for (auto& p : img) p = uint8_t(40 + rng() % 150);
    const float hw = float(w) / 2, hh = float(h) / 2;
    // Rows: translate by (3, -2), a quarter turn of a square part, then the photometric kinds.
    const std::vector<std::array<float, 8>> rows = {{1, 1 / hw, 0, -3 / hw, 0, 1 / hh, 2 / hh, 0},
                                                    {1, 0, -1 / hw, 0, 1 / hh, 0, 0, 0},
                                                    {2, 1.3f, -0.3f},
                                                    {2, 0.6f, 0.4f},
                                                    {3, 1.7f, -0.7f},
                                                    {3, 0.2f, 0.8f},
                                                    {4, 1.45f, -0.45f},
                                                    {4, 0.5f, 0.5f},
                                                    {5, 1.9f, -0.9f},
                                                    {5, 0.3f, 0.7f},
                                                    {6, 3},
                                                    {6, 8},
                                                    {6, 0},
                                                    {7, 128.5f},
                                                    {7, 0},
                                                    {8},
                                                    {9},
                                                    {10, 0.3f},
                                                    {10, -0.45f},
                                                    {0}};
    std::vector<uint8_t> batch;
    std::vector<float> program;
    for (const auto& r : rows) {
      batch.insert(batch.end(), img.begin(), img.end());
      program.insert(program.end(), r.begin(), r.end());
    }
    const auto b = int64_t(rows.size());
    const std::vector<uint8_t> got =
        ops::augment_images(Tensor::from_vector(batch, {b, h, w, c}),
                            Tensor::from_vector(program, {b, 1, kImageOpWidth}))
            .to_vector<uint8_t>();
    for (int64_t k = 0; k < b; ++k) {
      const auto kind = ImageOpKind(int32_t(rows[size_t(k)][0]));
      const std::vector<double> want = augment_reference(img, h, w, c, rows[size_t(k)]);
      const bool exact = kind == ImageOpKind::Affine || kind == ImageOpKind::Posterize ||
                         kind == ImageOpKind::Solarize || kind == ImageOpKind::Equalize ||
                         kind == ImageOpKind::None;
      int64_t off = 0;
      for (int64_t e = 0; e < n; ++e) {
        const double d = std::abs(double(got[size_t(k * n + e)]) - want[size_t(e)]);
        ASSERT_LE(d, exact ? 0.0 : 1.0) << "row " << k << " element " << e << ", " << c << " ch";
        off += d > 0;
      }
      EXPECT_LE(off, n / 4) << "row " << k << ", " << c << " channels";
      if (kind == ImageOpKind::Saturation || kind == ImageOpKind::Hue) {
        const bool same = std::equal(img.begin(), img.end(), got.begin() + k * n);
        EXPECT_EQ(same, c == 1) << "row " << k;
      }
    }
    // Two rows in order: solarize then posterize is not posterize then solarize.
    const std::vector<float> two = {7, 100, 0, 0, 0, 0, 0, 0, 6, 2, 0, 0, 0, 0, 0, 0};
    const std::vector<uint8_t> seq =
        ops::augment_images(Tensor::from_vector(img, {1, h, w, c}),
                            Tensor::from_vector(two, {1, 2, kImageOpWidth}))
            .to_vector<uint8_t>();
    for (int64_t e = 0; e < n; ++e) {
      const int v = img[size_t(e)], s = v >= 100 ? 255 - v : v;
      ASSERT_EQ(int(seq[size_t(e)]), s & 0xc0) << e;
    }
  }
}

// Without a table, gather_batch writes the pixel values: padding and the box 0.
TEST(GatherBatch, WithoutATableGivesThePixelValues) {
  const Data d;
  const std::vector<int64_t> idx = {3, 0, 6};
  const std::vector<int32_t> aug = {1, -2, 1, 0,  0, 2, 3, 0, 0, 0, 0,
                                    0, 0,  0, -1, 3, 0, 1, 1, 4, 5};
  const ops::GatheredBatch g =
      ops::gather_batch(d.images(), d.label_tensor(), Tensor::from_vector(idx, {3}),
                        Tensor::from_vector(aug, {3, 7}), Tensor());
  ASSERT_EQ(g.images.dtype(), DType::U8);
  const std::vector<uint8_t> got = g.images.to_vector<uint8_t>();
  // The reference's table value minus the table's base is the pixel value a hundredfold.
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t y = 0; y < d.h; ++y)
      for (int64_t x = 0; x < d.w; ++x)
        for (int64_t ch = 0; ch < d.c; ++ch) {
          const float t = d.reference(idx[size_t(b)], aug.data() + 7 * b, y, x, ch);
          const long want = std::lround((t + 3.0f) * 100.0f) - ch * 256;
          ASSERT_EQ(long(got[size_t(((b * d.h + y) * d.w + x) * d.c + ch)]), want);
        }
}

}  // namespace
}  // namespace hg
