// Fused SGD and AdamW updates on the GPU over flat f32 tensors (the parameter arena), one
// kernel launch each (optimizer_kernels.cu). Scalar coefficients are computed in double and
// rounded to f32 once, exactly as the CPU backend does (here, or in the kernel for AdamW's bias
// corrections, which depend on the update number held on the device), so both backends apply
// the same f32 arithmetic per element. The skip flag, the update number and a learning rate
// held on the device are read by the kernels, never here.
#include <cmath>

#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/backend/gpu/optimizer_kernels.h"

namespace hg {

namespace {

const float* skip_pointer(const char* op, const Tensor& params, const Tensor& skip) {
  if (!skip.defined()) return nullptr;
  check_dtype(op, "skip flag", skip, DType::F32);
  check_same_device(op, params, skip);
  HG_CHECK(skip.numel() == 1, "{}: skip flag must have one element, got {}", op, skip.describe());
  return static_cast<const float*>(skip.data_ptr());
}

// Adam's coefficients, each rounded to f32 once, and the betas exact for the bias corrections
// (AdamW's and LAMB's kernels); the rate and decay fields are the caller's.
gpu::AdamWCoefficients adam_coefficients(const AdamWOptions& o) {
  gpu::AdamWCoefficients c{};
  c.beta1 = float(o.beta1);
  c.one_minus_beta1 = float(1.0 - o.beta1);
  c.beta2 = float(o.beta2);
  c.one_minus_beta2 = float(1.0 - o.beta2);
  c.eps = float(o.eps);
  c.beta1_exact = o.beta1;
  c.beta2_exact = o.beta2;
  return c;
}

// The device copy of the learning rate (ops::check_lr has checked it), or null.
const double* lr_pointer(const Tensor& lr) {
  return lr.defined() ? static_cast<const double*>(lr.data_ptr()) : nullptr;
}

}  // namespace

void GpuBackend::sgd_step(Tensor& params, const Tensor& grads, Tensor& momentum,
                          const SgdOptions& o, bool first_step, const Tensor& skip,
                          const Tensor& lr) {
  const float* skip_flag = skip_pointer("sgd_step", params, skip);
  gpu::SgdCoefficients c{};
  c.lr = float(o.lr);
  c.lr_device = lr_pointer(lr);
  c.weight_decay = float(o.weight_decay);
  c.decay = o.weight_decay != 0.0;
  c.momentum = float(o.momentum);
  c.keep = float(1.0 - o.dampening);
  c.nesterov = o.nesterov;
  c.first_step = first_step;
  float* buf = o.momentum != 0.0 ? static_cast<float*>(momentum.data_ptr()) : nullptr;
  gpu::launch_sgd(static_cast<float*>(params.data_ptr()),
                  static_cast<const float*>(grads.data_ptr()), buf, params.numel(), c, skip_flag,
                  gpu::stream_for(params));
}

void GpuBackend::adamw_step(Tensor& params, const Tensor& grads, Tensor& exp_avg,
                            Tensor& exp_avg_sq, const AdamWOptions& o, const Tensor& step,
                            const Tensor& skip, const Tensor& lr) {
  const float* skip_flag = skip_pointer("adamw_step", params, skip);
  // PyTorch: param *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  //          param -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
  // bc1 and bc2 depend on the update number, which the kernel reads from `step`.
  gpu::AdamWCoefficients c = adam_coefficients(o);
  c.decay = float(1.0 - o.lr * o.weight_decay);
  c.lr = o.lr;
  c.lr_device = lr_pointer(lr);
  c.weight_decay_exact = o.weight_decay;
  gpu::launch_adamw(static_cast<float*>(params.data_ptr()),
                    static_cast<const float*>(grads.data_ptr()),
                    static_cast<float*>(exp_avg.data_ptr()),
                    static_cast<float*>(exp_avg_sq.data_ptr()), params.numel(), c,
                    static_cast<const float*>(step.data_ptr()), skip_flag, gpu::stream_for(params));
}

void GpuBackend::lamb_direction(Tensor& out, const Tensor& params, const Tensor& grads,
                                Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWOptions& o,
                                const Tensor& step, const Tensor& skip) {
  const float* skip_flag = skip_pointer("lamb_direction", params, skip);
  const gpu::AdamWCoefficients c = adam_coefficients(o);
  gpu::launch_lamb_direction(
      static_cast<float*>(out.data_ptr()), static_cast<const float*>(params.data_ptr()),
      static_cast<const float*>(grads.data_ptr()), static_cast<float*>(exp_avg.data_ptr()),
      static_cast<float*>(exp_avg_sq.data_ptr()), params.numel(), c, float(o.weight_decay),
      static_cast<const float*>(step.data_ptr()), skip_flag, gpu::stream_for(params));
}

Tensor GpuBackend::segment_sum_squares(const Tensor& x, const Tensor& offsets) {
  const int64_t segments = offsets.numel() - 1;
  Tensor out = Tensor::empty({segments}, DType::F32, x.device());
  gpu::launch_segment_sum_squares(static_cast<const float*>(x.data_ptr()),
                                  static_cast<const int64_t*>(offsets.data_ptr()), segments,
                                  static_cast<float*>(out.data_ptr()), gpu::stream_for(x));
  return out;
}

void GpuBackend::lars_adapt_grads_(Tensor& grads, const Tensor& params, const Tensor& offsets,
                                   const Tensor& params_sq, const Tensor& grads_sq,
                                   double weight_decay, const LarsOptions& o, const Tensor& lr) {
  HG_CHECK(offsets.numel() - 1 <= 65535,
           "lars_adapt_grads_: {} segments (parameter tensors), at most 65,535 on a GPU",
           offsets.numel() - 1);
  gpu::LarsCoefficients c{};
  c.weight_decay = weight_decay;
  c.trust_coeff = o.trust_coeff;
  c.eps = o.eps;
  c.trust_clip = o.trust_clip;
  c.lr_device = lr_pointer(lr);
  gpu::launch_lars_adapt_grads(
      static_cast<float*>(grads.data_ptr()), static_cast<const float*>(params.data_ptr()),
      static_cast<const int64_t*>(offsets.data_ptr()), offsets.numel() - 1,
      static_cast<const float*>(params_sq.data_ptr()),
      static_cast<const float*>(grads_sq.data_ptr()), c, gpu::stream_for(params));
}

void GpuBackend::advance_step_(Tensor& step, const Tensor& skip) {
  const float* skip_flag = skip_pointer("advance_step_", step, skip);
  gpu::launch_advance_step(static_cast<float*>(step.data_ptr()), skip_flag, gpu::stream_for(step));
}

}  // namespace hg
