#include "hourglass/data/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"

namespace hg::data {

namespace {

// Separates these streams from the shuffle and the fixed-size crop streams of one seed.
constexpr uint64_t kResizedCropTag = 0x525243524F500000ull;  // "RRCROP"

// Python's round() (halves to even), which torchvision's box arithmetic uses; the default
// floating-point rounding mode is the same rule.
int64_t round_half_even(double v) { return int64_t(std::nearbyint(v)); }

// Where output coordinate `o` of `out` samples along an axis of `extent` source pixels that
// start at `begin`: the two neighbours (absolute) and the weight of the second.
struct Tap {
  int64_t i0, i1;
  float w1;
};

Tap tap(int64_t o, int64_t out, int64_t begin, int64_t extent) {
  const double scale = double(extent) / double(out);
  const double s = std::max((double(o) + 0.5) * scale - 0.5, 0.0);
  const auto i0 = std::min(int64_t(s), extent - 1);
  const int64_t i1 = std::min(i0 + 1, extent - 1);
  return {begin + i0, begin + i1, float(s - double(i0))};
}

// How resize_rows writes a value: as f32, normalised or not, or rounded to uint8.
enum class Output { F32, Normalized, U8 };

// One source row interpolated horizontally at the written columns' taps (offsets in values
// from the row's start): `width` pixels of `C` channels (C = 0: c at run time; a compile-time
// count lets the compiler unroll the channel loop).
template <int C>
void interpolate_row(const uint8_t* row, const std::vector<Tap>& cols, int64_t c, float* out) {
  if constexpr (C > 0) c = C;
  for (size_t x = 0; x < cols.size(); ++x) {
    const Tap& tx = cols[x];
    const float wx1 = tx.w1, wx0 = 1.0f - tx.w1;
    const uint8_t* p0 = row + tx.i0;
    const uint8_t* p1 = row + tx.i1;
    float* o = out + int64_t(x) * c;
    for (int64_t ch = 0; ch < c; ++ch) o[ch] = float(p0[ch]) * wx0 + float(p1[ch]) * wx1;
  }
}

// The rows of resize_bilinear, in two passes: each source row the window reads is interpolated
// horizontally once (consecutive output rows share source rows: two rows are kept), then each
// output value is the vertical blend of its two rows, v = top * wy0 + bottom * wy1, with top and
// bottom the horizontal blends: the arithmetic of the direct four-tap formula, so the same
// values, at a fraction of its work. The blend runs over a whole row's values at once (the
// per-channel factors of normalisation laid out per value), which the compiler vectorises.
template <int C, Output Mode, typename T>
void resize_rows(const ImageRegion& src, const CropBox& box, int64_t out_height,
                 const CropBox& window, const std::vector<Tap>& cols, T* out, const float* scale,
                 const float* bias) {
  const int64_t c = C > 0 ? C : src.channels;
  const int64_t row_values = src.width * c, values = window.width * c;
  // Scratch kept by the thread (a loader worker resizes image after image): the two
  // interpolated rows, then the normalisation's factors per value of a row.
  thread_local std::vector<float> scratch;
  scratch.resize(size_t(4 * values));
  float* rows[2] = {scratch.data(), scratch.data() + values};
  float* scale_row = scratch.data() + 2 * values;
  float* bias_row = scratch.data() + 3 * values;
  if constexpr (Mode == Output::Normalized) {
    for (int64_t k = 0; k < values; ++k) {
      scale_row[k] = scale[k % c];
      bias_row[k] = bias[k % c];
    }
  }
  int64_t held[2] = {-1, -1};  // the source row in each of `rows`
  // Source row r interpolated, computed into the slot that does not hold `keep` when absent.
  auto interpolated = [&](int64_t r, int64_t keep) -> const float* {
    for (int s = 0; s < 2; ++s)
      if (held[s] == r) return rows[s];
    const int s = held[0] == keep ? 1 : 0;
    interpolate_row<C>(src.pixels + (r - src.top) * row_values, cols, c, rows[s]);
    held[s] = r;
    return rows[s];
  };
  for (int64_t y = 0; y < window.height; ++y) {
    const Tap ty = tap(window.top + y, out_height, box.top, box.height);
    const float* top = interpolated(ty.i0, ty.i1);
    const float* bottom = interpolated(ty.i1, ty.i0);
    const float wy1 = ty.w1, wy0 = 1.0f - ty.w1;
    T* row = out + y * values;
    for (int64_t k = 0; k < values; ++k) {
      const float v = top[k] * wy0 + bottom[k] * wy1;
      if constexpr (Mode == Output::U8)
        row[k] = uint8_t(v + 0.5f);  // v is in [0, 255]: a convex sum of pixels
      else if constexpr (Mode == Output::Normalized)
        row[k] = v * scale_row[k] + bias_row[k];
      else
        row[k] = v;
    }
  }
}

// The arguments of a resize (antialiased or not): a box, a window inside the output, and a
// source region holding every pixel the resize reads.
void check_resize(const ImageRegion& src, const CropBox& box, int64_t out_height, int64_t out_width,
                  const CropBox& window, bool antialiased) {
  HG_ASSERT(box.height >= 1 && box.width >= 1, "empty crop box {}x{}", box.height, box.width);
  HG_ASSERT(window.top >= 0 && window.left >= 0 && window.height >= 1 && window.width >= 1 &&
                window.top + window.height <= out_height && window.left + window.width <= out_width,
            "window {},{} {}x{} outside a {}x{} resize", window.top, window.left, window.height,
            window.width, out_height, out_width);
  const CropBox need = resize_footprint(box, out_height, out_width, window, antialiased);
  HG_ASSERT(src.channels >= 1 && need.top >= src.top && need.left >= src.left &&
                need.top + need.height <= src.top + src.height &&
                need.left + need.width <= src.left + src.width,
            "the resize reads rows {}..{}, columns {}..{}; the image holds rows {}..{}, columns "
            "{}..{}",
            need.top, need.top + need.height, need.left, need.left + need.width, src.top,
            src.top + src.height, src.left, src.left + src.width);
}

// Checks resize_bilinear's arguments and returns the written columns' taps, as offsets into a
// row of `src`.
std::vector<Tap> column_taps(const ImageRegion& src, const CropBox& box, int64_t out_height,
                             int64_t out_width, const CropBox& window, bool flip) {
  check_resize(src, box, out_height, out_width, window, false);
  std::vector<Tap> cols(size_t(window.width));
  for (int64_t x = 0; x < window.width; ++x) {
    // A flip mirrors the window: written column x shows window column width-1-x.
    const int64_t wx = flip ? window.width - 1 - x : x;
    Tap t = tap(window.left + wx, out_width, box.left, box.width);
    t.i0 = (t.i0 - src.left) * src.channels;
    t.i1 = (t.i1 - src.left) * src.channels;
    cols[size_t(x)] = t;
  }
  return cols;
}

template <Output Mode, typename T>
void resize_any(const ImageRegion& src, const CropBox& box, int64_t out_height,
                const CropBox& window, const std::vector<Tap>& cols, T* out, const float* scale,
                const float* bias) {
  if (src.channels == 3)
    resize_rows<3, Mode>(src, box, out_height, window, cols, out, scale, bias);
  else
    resize_rows<0, Mode>(src, box, out_height, window, cols, out, scale, bias);
}

// The antialiased taps of output coordinate `o` of `out` along an axis of `extent` source
// pixels from `begin` (PIL's bilinear filter, Resample.c's precompute_coeffs): the triangle
// 1 - |t| over t = (source centre - sample centre) / max(1, scale), the taps clamped to the
// axis and their weights normalised to sum 1.
struct FilterTaps {
  int64_t first = 0;  // absolute index of the first tap
  std::vector<float> weights;
};

FilterTaps filter_taps(int64_t o, int64_t out, int64_t begin, int64_t extent) {
  const double scale = double(extent) / double(out);
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's half-width, in source pixels
  const double centre = (double(o) + 0.5) * scale;
  const int64_t lo = std::max<int64_t>(int64_t(centre - support + 0.5), 0);
  const int64_t hi = std::min<int64_t>(int64_t(centre + support + 0.5), extent);
  std::vector<double> w(size_t(std::max<int64_t>(hi - lo, 0)));
  double total = 0;
  for (int64_t x = lo; x < hi; ++x) {
    const double t = std::abs((double(x) - centre + 0.5) / filter_scale);
    w[size_t(x - lo)] = t < 1.0 ? 1.0 - t : 0.0;
    total += w[size_t(x - lo)];
  }
  FilterTaps taps;
  taps.first = begin + lo;
  taps.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) taps.weights[k] = float(total > 0 ? w[k] / total : 0.0);
  // Zero weights at the ends (the triangle's edges) read nothing: drop them.
  while (!taps.weights.empty() && taps.weights.back() == 0.0f) taps.weights.pop_back();
  while (!taps.weights.empty() && taps.weights.front() == 0.0f) {
    taps.weights.erase(taps.weights.begin());
    ++taps.first;
  }
  return taps;
}

// resize_antialiased's two passes: the source rows the window's vertical taps read, each
// filtered horizontally at the written columns into a f32 row, then each written row the
// weighted sum of its rows.
template <Output Mode, typename T>
void resize_filtered(const ImageRegion& src, const CropBox& box, int64_t out_height,
                     int64_t out_width, const CropBox& window, bool flip, T* out,
                     const float* scale, const float* bias) {
  check_resize(src, box, out_height, out_width, window, true);
  const CropBox need = resize_footprint(box, out_height, out_width, window, true);
  const int64_t c = src.channels, values = window.width * c;
  std::vector<FilterTaps> cols(size_t(window.width)), rows(size_t(window.height));
  for (int64_t x = 0; x < window.width; ++x) {
    const int64_t wx = flip ? window.width - 1 - x : x;  // a flip mirrors the window
    cols[size_t(x)] = filter_taps(window.left + wx, out_width, box.left, box.width);
  }
  for (int64_t y = 0; y < window.height; ++y)
    rows[size_t(y)] = filter_taps(window.top + y, out_height, box.top, box.height);
  // The horizontal pass over rows [need.top, need.top + need.height).
  std::vector<float> filtered(size_t(need.height * values), 0.0f);
  for (int64_t r = 0; r < need.height; ++r) {
    const uint8_t* row = src.pixels + (need.top + r - src.top) * src.width * c;
    float* f = filtered.data() + r * values;
    for (int64_t x = 0; x < window.width; ++x) {
      const FilterTaps& t = cols[size_t(x)];
      for (int64_t ch = 0; ch < c; ++ch) {
        float acc = 0.0f;
        for (size_t k = 0; k < t.weights.size(); ++k)
          acc += t.weights[k] * float(row[(t.first + int64_t(k) - src.left) * c + ch]);
        f[x * c + ch] = acc;
      }
    }
  }
  for (int64_t y = 0; y < window.height; ++y) {
    const FilterTaps& t = rows[size_t(y)];
    T* o = out + y * values;
    for (int64_t k = 0; k < values; ++k) {
      float v = 0.0f;
      for (size_t j = 0; j < t.weights.size(); ++j)
        v += t.weights[j] * filtered[size_t((t.first + int64_t(j) - need.top) * values + k)];
      if constexpr (Mode == Output::U8)
        o[k] = uint8_t(std::clamp(v, 0.0f, 255.0f) + 0.5f);
      else if constexpr (Mode == Output::Normalized)
        o[k] = v * scale[k % c] + bias[k % c];
      else
        o[k] = v;
    }
  }
}

}  // namespace

CropBox resize_footprint(const CropBox& box, int64_t out_height, int64_t out_width,
                         const CropBox& window, bool antialiased) {
  if (antialiased) {
    // The filter's taps move monotonically with the output coordinate too.
    const FilterTaps top = filter_taps(window.top, out_height, box.top, box.height);
    const FilterTaps bottom =
        filter_taps(window.top + window.height - 1, out_height, box.top, box.height);
    const FilterTaps left = filter_taps(window.left, out_width, box.left, box.width);
    const FilterTaps right =
        filter_taps(window.left + window.width - 1, out_width, box.left, box.width);
    const int64_t y1 = bottom.first + int64_t(bottom.weights.size());
    const int64_t x1 = right.first + int64_t(right.weights.size());
    return {top.first, left.first, y1 - top.first, x1 - left.first};
  }
  // Taps move monotonically with the output coordinate: the window's first and last rows and
  // columns bound what it reads.
  const Tap top = tap(window.top, out_height, box.top, box.height);
  const Tap bottom = tap(window.top + window.height - 1, out_height, box.top, box.height);
  const Tap left = tap(window.left, out_width, box.left, box.width);
  const Tap right = tap(window.left + window.width - 1, out_width, box.left, box.width);
  return {top.i0, left.i0, bottom.i1 + 1 - top.i0, right.i1 + 1 - left.i0};
}

void resize_bilinear(const ImageRegion& src, const CropBox& box, int64_t out_height,
                     int64_t out_width, const CropBox& window, bool flip, float* out,
                     const float* scale, const float* bias) {
  HG_ASSERT((scale == nullptr) == (bias == nullptr), "resize_bilinear: scale without bias");
  const std::vector<Tap> cols = column_taps(src, box, out_height, out_width, window, flip);
  if (scale != nullptr)
    resize_any<Output::Normalized>(src, box, out_height, window, cols, out, scale, bias);
  else
    resize_any<Output::F32>(src, box, out_height, window, cols, out, scale, bias);
}

void resize_bilinear(const ImageRegion& src, const CropBox& box, int64_t out_height,
                     int64_t out_width, const CropBox& window, bool flip, uint8_t* out) {
  const std::vector<Tap> cols = column_taps(src, box, out_height, out_width, window, flip);
  resize_any<Output::U8>(src, box, out_height, window, cols, out, nullptr, nullptr);
}

void resize_antialiased(const ImageRegion& src, const CropBox& box, int64_t out_height,
                        int64_t out_width, const CropBox& window, bool flip, float* out,
                        const float* scale, const float* bias) {
  HG_ASSERT((scale == nullptr) == (bias == nullptr), "resize_antialiased: scale without bias");
  if (scale != nullptr)
    resize_filtered<Output::Normalized>(src, box, out_height, out_width, window, flip, out, scale,
                                        bias);
  else
    resize_filtered<Output::F32>(src, box, out_height, out_width, window, flip, out, scale, bias);
}

void resize_antialiased(const ImageRegion& src, const CropBox& box, int64_t out_height,
                        int64_t out_width, const CropBox& window, bool flip, uint8_t* out) {
  resize_filtered<Output::U8>(src, box, out_height, out_width, window, flip, out, nullptr, nullptr);
}

CropBox resized_crop_try(int64_t height, int64_t width, const ResizedCropOptions& o, double u_area,
                         double u_ratio, bool& fits) {
  const double area = double(height) * double(width);
  const double target_area = area * (o.scale_min + u_area * (o.scale_max - o.scale_min));
  const double log_min = std::log(o.ratio_min), log_max = std::log(o.ratio_max);
  const double ratio = std::exp(log_min + u_ratio * (log_max - log_min));
  CropBox box;
  box.width = int64_t(round_half_even(std::sqrt(target_area * ratio)));
  box.height = int64_t(round_half_even(std::sqrt(target_area / ratio)));
  fits = box.width > 0 && box.width <= width && box.height > 0 && box.height <= height;
  return box;
}

CropBox fallback_center_crop(int64_t height, int64_t width, const ResizedCropOptions& o) {
  const double in_ratio = double(width) / double(height);
  CropBox box{0, 0, height, width};
  if (in_ratio < o.ratio_min) {
    box.height = std::clamp<int64_t>(round_half_even(double(width) / o.ratio_min), 1, height);
  } else if (in_ratio > o.ratio_max) {
    box.width = std::clamp<int64_t>(round_half_even(double(height) * o.ratio_max), 1, width);
  }
  box.top = (height - box.height) / 2;
  box.left = (width - box.width) / 2;
  return box;
}

EvalGeometry eval_geometry(int64_t height, int64_t width, int64_t resize_to, int64_t crop) {
  HG_ASSERT(resize_to >= crop && crop >= 1, "resize {} smaller than crop {}", resize_to, crop);
  EvalGeometry g;
  if (height <= width) {
    g.resized_height = resize_to;
    g.resized_width = int64_t(double(resize_to) * double(width) / double(height));
  } else {
    g.resized_width = resize_to;
    g.resized_height = int64_t(double(resize_to) * double(height) / double(width));
  }
  g.resized_height = std::max(g.resized_height, crop);
  g.resized_width = std::max(g.resized_width, crop);
  g.window.height = crop;
  g.window.width = crop;
  g.window.top = round_half_even(double(g.resized_height - crop) / 2.0);
  g.window.left = round_half_even(double(g.resized_width - crop) / 2.0);
  return g;
}

int64_t eval_resize_for(int64_t size) { return round_half_even(double(size) * 256.0 / 224.0); }

SizedAugmentation draw_resized_crop(uint64_t seed, int64_t epoch, int64_t sample, int64_t height,
                                    int64_t width, const ResizedCropOptions& options, bool flip) {
  RandomStream rs(seed, mix_stream(uint64_t(epoch), uint64_t(sample), kResizedCropTag));
  auto uniform01 = [&rs] {
    const uint64_t bits = (uint64_t(rs.next_u32()) << 32) | rs.next_u32();
    return double(bits >> 11) * 0x1p-53;  // 53 random bits: [0, 1)
  };
  SizedAugmentation aug;
  aug.box = random_resized_crop(height, width, options, uniform01);
  // Drawn whether or not flipping is on, after the box as torchvision's pipeline draws it.
  aug.flip = uniform01() < 0.5 && flip;
  return aug;
}

}  // namespace hg::data
