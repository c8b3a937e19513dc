// A synthetic image set that a small model can fit: class templates made of low-frequency
// sinusoids plus per-pixel noise. Every value is a pure function of (seed, split, index), so
// the set is identical across runs and thread counts.
#include <algorithm>
#include <cmath>

#include "hourglass/base/error.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/rng.h"
#include "hourglass/data/dataset.h"

namespace hg::data {

namespace {

// Stream tags keep the template and sample streams apart from other users of the same seed.
constexpr uint64_t kTemplateTag = 0x53594E5454504C00ull;  // "SYNTTPL"
constexpr uint64_t kSampleTag = 0x53594E5453414D00ull;    // "SYNTSAM"
constexpr int kComponents = 2;                            // sinusoids per class and channel
constexpr float kTemplateScale = 80.0f;                   // template amplitude, in pixel levels
constexpr float kNoiseStd = 48.0f;                        // per-pixel noise, in pixel levels

// Template of one class, [H, W, C] floats roughly in [-1, 1].
std::vector<float> class_template(uint64_t seed, int64_t cls, int64_t h, int64_t w, int64_t c) {
  RandomStream rs(seed, mix_stream(kTemplateTag, uint64_t(cls)));
  std::vector<float> t(size_t(h * w * c), 0.0f);
  constexpr float kTwoPi = 6.283185307179586f;
  for (int64_t ch = 0; ch < c; ++ch) {
    const float offset = 0.6f * rs.uniform() - 0.3f;  // a class-dependent mean level
    for (int comp = 0; comp < kComponents; ++comp) {
      // 0..2 cycles across the image in each direction, never both 0 (that would be constant).
      int64_t fy = int64_t(rs.below(3));
      int64_t fx = int64_t(rs.below(3));
      if (fy == 0 && fx == 0) fx = 1;
      const float phase = kTwoPi * rs.uniform();
      const float amp = (0.5f + 0.5f * rs.uniform()) / kComponents;
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          const float arg = kTwoPi * (float(fy * y) / float(h) + float(fx * x) / float(w)) + phase;
          t[size_t((y * w + x) * c + ch)] += amp * std::sin(arg);
        }
      }
    }
    for (int64_t p = 0; p < h * w; ++p) t[size_t(p * c + ch)] += offset;
  }
  return t;
}

}  // namespace

ImageDataset make_synthetic(int64_t n, int64_t height, int64_t width, int64_t channels,
                            int64_t num_classes, uint64_t seed, Split split) {
  HG_CHECK(n >= 0, "synthetic dataset: size must be >= 0, got {}", n);
  HG_CHECK(height >= 1 && width >= 1 && channels >= 1,
           "synthetic dataset: image shape must be positive, got {}x{}x{}", height, width,
           channels);
  HG_CHECK(num_classes >= 1 && num_classes <= 256,
           "synthetic dataset: classes must be in [1, 256], got {}", num_classes);
  HG_CHECK(height * width * channels <= (int64_t(1) << 24),
           "synthetic dataset: image of {}x{}x{} is too large", height, width, channels);

  ImageDataset ds;
  ds.name = "synthetic";
  ds.source = fmt::format("synthetic {} split (seed {}, {} samples)", split_name(split), seed, n);
  ds.height = height;
  ds.width = width;
  ds.channels = channels;
  ds.num_classes = num_classes;
  const int64_t image_bytes = height * width * channels;
  ds.pixels.resize(size_t(n * image_bytes));
  ds.labels.resize(size_t(n));

  std::vector<std::vector<float>> templates;
  for (int64_t k = 0; k < num_classes; ++k) {
    templates.push_back(class_template(seed, k, height, width, channels));
  }
  const uint64_t split_id = split == Split::Train ? 0 : 1;
  // Each sample draws from its own stream, so chunking across threads cannot change values.
  parallel_for(n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      RandomStream rs(seed, mix_stream(kSampleTag, split_id, uint64_t(i)));
      const auto label = uint8_t(rs.below(uint64_t(num_classes)));
      ds.labels[size_t(i)] = label;
      const std::vector<float>& t = templates[label];
      uint8_t* out = ds.pixels.data() + i * image_bytes;
      for (int64_t p = 0; p < image_bytes; ++p) {
        const float v = 128.0f + kTemplateScale * t[size_t(p)] + kNoiseStd * rs.normal();
        out[p] = uint8_t(std::clamp(std::lround(v), 0l, 255l));
      }
    }
  });
  return ds;
}

}  // namespace hg::data
