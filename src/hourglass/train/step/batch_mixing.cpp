#include "hourglass/train/step/batch_mixing.h"

#include <algorithm>
#include <cmath>

#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"

namespace hg::train {

// The stream of the steps' mixing draws (apart from the other users of the run's seed).
constexpr uint64_t kMixStream = 0x6d69787570ull;  // "mixup"

MixDraw draw_batch_mix(const BatchMixing& mixing, uint64_t seed, int64_t step, int64_t height,
                       int64_t width) {
  HG_CHECK(mixing.mixup_alpha >= 0 && mixing.cutmix_alpha >= 0 && mixing.prob >= 0 &&
               mixing.prob <= 1 && mixing.switch_prob >= 0 && mixing.switch_prob <= 1,
           "batch mixing: alphas must be non-negative and probabilities in [0, 1]");
  MixDraw d;
  if (!mixing.enabled()) return d;
  RandomStream stream(seed, mix_stream(kMixStream, uint64_t(step)));
  if (stream.uniform_open() >= mixing.prob) return d;
  d.cutmix = mixing.cutmix_alpha > 0 &&
             (mixing.mixup_alpha == 0 || stream.uniform_open() < mixing.switch_prob);
  const double alpha = d.cutmix ? mixing.cutmix_alpha : mixing.mixup_alpha;
  const double lam = sample_beta(stream, alpha, alpha);
  if (!d.cutmix) {
    d.outside = d.inside = float(lam);
    d.lam = lam;
    return d;
  }
  const double ratio = std::sqrt(1.0 - lam);
  const int64_t cut_h = int64_t(double(height) * ratio), cut_w = int64_t(double(width) * ratio);
  const int64_t cy = int64_t(stream.below(uint64_t(height)));
  const int64_t cx = int64_t(stream.below(uint64_t(width)));
  d.y0 = std::clamp<int64_t>(cy - cut_h / 2, 0, height);
  d.y1 = std::clamp<int64_t>(cy + cut_h / 2, 0, height);
  d.x0 = std::clamp<int64_t>(cx - cut_w / 2, 0, width);
  d.x1 = std::clamp<int64_t>(cx + cut_w / 2, 0, width);
  d.outside = 1;
  d.inside = 0;
  d.lam = 1.0 - double((d.y1 - d.y0) * (d.x1 - d.x0)) / double(height * width);
  return d;
}

}  // namespace hg::train
