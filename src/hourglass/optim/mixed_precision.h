// Precision policies (decision 5) and the dynamic loss scaler.
//
//   fp32  everything in f32
//   tf32  f32 tensors; convolutions and matrix products on TF32 tensor cores (GPU)
//   bf16  convolutions and matrix products in bf16 (autocast), activations in bf16; f32 master
//         weights, gradients, batch-norm statistics, losses and optimizer state
//   fp16  as bf16 with f16, plus dynamic loss scaling so small gradients do not flush to zero
//
// The loss scaler keeps its whole state on the device: the scale seeds backward, the gradients
// are unscaled and checked for inf/NaN by one kernel over the flat gradient arena, the
// optimizer skips the update on the device when they overflowed, and the scale grows or backs
// off on the device. The host never waits for any of it.
#pragma once

#include <string>

#include "hourglass/autograd/tape.h"
#include "hourglass/nn/flat_parameters.h"

namespace hg::optim {

enum class Precision { FP32, TF32, BF16, FP16 };

// "fp32", "tf32", "bf16" or "fp16"; anything else throws InvalidInput naming `what` and the text.
Precision parse_precision(const std::string& text, const std::string& what = "precision");
const char* precision_name(Precision p);
// The autocast policy a precision trains and evaluates under.
autograd::AutocastPolicy autocast_policy(Precision p);
// Throws InvalidInput, naming both and what is missing, when the CPU `device` cannot compute in
// precision `p`: tf32 and fp16 (GPU-only), bf16 on a CPU without AVX-512 BF16 or AMX
// (Backend::compute_dtype_problem).
void require_device_for(Precision p, Device device);
// Applies the process-wide parts of a precision (TF32 on or off) and returns the policy to
// hold in an AutocastGuard around forward passes. Throws InvalidInput when the precision needs
// a GPU and `device` is the CPU.
autograd::AutocastPolicy apply_precision(Precision p, Device device);

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16, as torch.amp.GradScaler
  double growth = 2.0;
  double backoff = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  LossScaler(Device device, LossScalerOptions options = {});

  // The gradient backward starts from: the current scale, a scalar on the device
  // (autograd::backward(loss, scaler.seed())).
  Tensor seed() const;
  // After backward: gradients /= scale, and the found-inf flag set when any is inf or NaN.
  void unscale(const FlatParameters& flat);
  // The flag an optimizer skips its update on (Optimizer::set_skip_flag).
  Tensor found_inf() const;
  // After the optimizer step: backs off on overflow, grows after growth_interval clean steps.
  void update();

  // The state tensor f32 [3] {scale, found_inf, good_steps}, for checkpoints (shares memory).
  Tensor state() const { return state_; }
  // Restores a state() (any device; copied in).
  void load_state(const Tensor& state);
  // The current scale, read from the device (waits for it): for logs, not for the step.
  double scale() const;

 private:
  LossScalerOptions options_;
  Tensor state_;
};

}  // namespace hg::optim
