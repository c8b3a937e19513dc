// LARS's trust ratio (ops::lars_adapt_grads_, LarsOptions), written once for the CPU backend
// and the GPU kernels so both compute the same double and round it to the same f32. Compiled
// by g++, nvcc and hipcc: includes nothing but <cmath>.
#pragma once

#include <cmath>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HG_LARS_HOST_DEVICE __host__ __device__
#else
#define HG_LARS_HOST_DEVICE
#endif

namespace hg {

// From a tensor's sums of squares of weights and gradients: trust_coeff * |w| / (|g| +
// weight_decay * |w| + eps), 1 when |w| or |g| is 0, and with trust_clip min(trust / lr, 1).
HG_LARS_HOST_DEVICE inline float lars_trust(float w_sq, float g_sq, double weight_decay,
                                            double trust_coeff, double eps, bool trust_clip,
                                            double lr) {
  const double w = std::sqrt(double(w_sq)), g = std::sqrt(double(g_sq));
  double trust = w > 0 && g > 0 ? trust_coeff * w / (g + weight_decay * w + eps) : 1.0;
  if (trust_clip) trust = std::fmin(trust / lr, 1.0);
  return float(trust);
}

}  // namespace hg
