// Launchers of the fused optimizer updates (optimizer_kernels.cu), called by optimizer.cpp.
// All arrays are n contiguous f32 on the device. `skip`, when not null, points to one f32 on
// the device: the kernel reads it and leaves everything untouched when it is nonzero (the
// loss scaler's found-inf flag), so the host never waits for it. Nothing is launched for n = 0.
#pragma once

#include <cstdint>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// torch.optim.SGD, with the CPU backend's arithmetic (backend/cpu/optimizer.cpp):
//   d = g + wd p (when decay); b = first_step ? d : mu b + keep d;
//   p -= lr (nesterov ? d + mu b : b)
// Without momentum (momentum == nullptr): p -= lr d.
// lr_device, when not null, points to the learning rate (f64) on the device, read by every
// thread and rounded to f32 there in place of lr.
struct SgdCoefficients {
  float lr, weight_decay, momentum, keep;  // keep = 1 - dampening
  bool decay, nesterov, first_step;
  const double* lr_device;
};
void launch_sgd(float* params, const float* grads, float* momentum, int64_t n,
                const SgdCoefficients& c, const float* skip, gpuStream_t stream);

// torch.optim.AdamW, with the CPU backend's arithmetic: the step-independent coefficients are
// computed on the host in double and rounded to f32 once, as the CPU does; the bias
// corrections depend on the update number, which lives on the device (*step, f32, >= 1), so
// the first thread of each block computes them in double from lr, beta1_exact, beta2_exact:
//   step_size = lr / (1 - beta1^t), inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t), each rounded to f32;
//   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p = p * decay - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
// lr_device, when not null, points to the learning rate (f64) on the device, which then
// replaces lr there, and decay = 1 - lr * weight_decay_exact is computed from it the same way
// (in double, rounded once, no fused multiply-add).
struct AdamWCoefficients {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  double lr, weight_decay_exact, beta1_exact, beta2_exact;
  const double* lr_device;
};
void launch_adamw(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const AdamWCoefficients& c, const float* step, const float* skip,
                  gpuStream_t stream);

// LARS (ops::segment_sum_squares and ops::lars_adapt_grads_; offsets: segments + 1 i64 on the
// device). Sums of squares: one block per segment, double partials reduced in a fixed order.
// The adaptation (at most 65,535 segments: one grid row each): grads = fmaf(weight_decay, params,
// grads) * trust, trust from lars_trust() (backend/lars_trust.h) as the CPU computes it; lr_device
// (f64) is read only with trust_clip.
void launch_segment_sum_squares(const float* x, const int64_t* offsets, int64_t segments,
                                float* out, gpuStream_t stream);
struct LarsCoefficients {
  double weight_decay, trust_coeff, eps;
  bool trust_clip;
  const double* lr_device;
};
void launch_lars_adapt_grads(float* grads, const float* params, const int64_t* offsets,
                             int64_t segments, const float* params_sq, const float* grads_sq,
                             const LarsCoefficients& c, gpuStream_t stream);

// LAMB's direction (ops::lamb_direction), with the CPU's arithmetic: the bias corrections in
// double from *step by the first thread of each block, rounded to f32 once;
//   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   out = fmaf(weight_decay, p, (m * inv_bc1) / (sqrt(v) * inv_sqrt_bc2 + eps)).
void launch_lamb_direction(float* out, const float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, int64_t n, const AdamWCoefficients& c,
                           float weight_decay, const float* step, const float* skip,
                           gpuStream_t stream);

// *step += 1 unless skip is not null and *skip is nonzero: one thread, nothing read back.
void launch_advance_step(float* step, const float* skip, gpuStream_t stream);

}  // namespace hg::gpu
