// Mixup and cutmix (train.mixup_alpha, train.cutmix_alpha): each training step's batch mixed
// with itself reversed, and the loss mixed in the same proportion, as timm's Mixup does in its
// batch mode (with correct_lam):
//   with probability `prob` a step mixes; if both alphas are set, cutmix with probability
//   `switch_prob`, else mixup; lam ~ Beta(alpha, alpha) of the chosen kind;
//   mixup: every pixel lam * own + (1 - lam) * partner's;
//   cutmix: a box of sides int(H sqrt(1 - lam)) x int(W sqrt(1 - lam)) centred on a uniform
//   pixel, clipped to the image, takes the partner's pixels, and lam becomes the share of the
//   image left outside it;
//   loss = lam * CE(logits, own labels) + (1 - lam) * CE(logits, partners' labels) (with the
//   label smoothing on both: the cross-entropy of timm's mixed soft targets).
// A step's draw is a pure function of (seed, step), so a resumed run draws what an uninterrupted
// one does; the TrainStep writes it to a device tensor before the step's device work, which a
// captured graph then reads (ops::mix_batch).
#pragma once

#include <cstdint>

namespace hg::train {

struct BatchMixing {
  double mixup_alpha = 0;    // > 0: mixup with lam ~ Beta(alpha, alpha)
  double cutmix_alpha = 0;   // > 0: cutmix with lam ~ Beta(alpha, alpha)
  double prob = 1;           // the probability that a step mixes at all
  double switch_prob = 0.5;  // with both alphas: the probability of cutmix
  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// One step's draw, as ops::mix_batch's parameters and the loss's weight.
struct MixDraw {
  float outside = 1, inside = 1;           // each pixel's weight of its own image
  int64_t y0 = 0, x0 = 0, y1 = 0, x1 = 0;  // the box [y0, y1) x [x0, x1); empty for mixup
  double lam = 1;                          // the weight of each row's own label
  bool cutmix = false;
};

MixDraw draw_batch_mix(const BatchMixing& mixing, uint64_t seed, int64_t step, int64_t height,
                       int64_t width);

}  // namespace hg::train
