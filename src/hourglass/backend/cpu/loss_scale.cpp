// Dynamic loss scaling on the CPU: unscaling with the inf/NaN check, and the scale update.
// Same rules as torch.amp.GradScaler (_amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_).
#include <algorithm>
#include <cmath>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/base/parallel.h"

namespace hg {

void CpuBackend::unscale_grads_(Tensor& grads, Tensor& state) {
  float* g = grads.data<float>();
  float* s = state.data<float>();
  const float inv_scale = 1.0f / s[0];
  const int64_t n = grads.numel();
  const int64_t chunks = (n + (1 << 16) - 1) >> 16;
  std::vector<uint8_t> bad(size_t(std::max<int64_t>(chunks, 1)), 0);
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t end = std::min(n, (c + 1) << 16);
      uint8_t found = 0;
      for (int64_t i = c << 16; i < end; ++i) {
        g[i] *= inv_scale;
        found |= uint8_t(!std::isfinite(g[i]));
      }
      bad[size_t(c)] = found;
    }
  });
  for (uint8_t b : bad)
    if (b) s[1] = 1.0f;
}

void CpuBackend::update_loss_scale_(Tensor& state, double growth, double backoff,
                                    int64_t growth_interval) {
  float* s = state.data<float>();
  if (s[1] != 0.0f) {
    s[0] = float(double(s[0]) * backoff);
    s[2] = 0.0f;
  } else {
    s[2] += 1.0f;
    if (int64_t(s[2]) >= growth_interval) {
      const float grown = float(double(s[0]) * growth);
      if (std::isfinite(grown)) s[0] = grown;  // never grow the scale to inf
      s[2] = 0.0f;
    }
  }
  s[1] = 0.0f;
}

}  // namespace hg
