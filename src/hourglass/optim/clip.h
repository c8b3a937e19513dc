// Global-norm gradient clipping over the flat gradient buffer, with PyTorch's
// torch.nn.utils.clip_grad_norm_ semantics (L2 norm, error_if_nonfinite=False):
//   total = ||grads||_2;  coef = max_norm / (total + 1e-6);  if coef < 1: grads *= coef
// One reduction and at most one scaling pass over the arena, however many parameters.
#pragma once

#include "hourglass/nn/flat_parameters.h"

namespace hg::optim {

// The L2 norm of all gradients (read back to the host).
double grad_norm(const FlatParameters& flat);

// Clips in place and returns the norm before clipping. A non-finite norm (NaN or inf gradient)
// leaves the gradients untouched and is returned as is, so the caller can skip the step.
// Throws InvalidInput when max_norm is not positive.
double clip_grad_norm(FlatParameters& flat, double max_norm);

// As clip_grad_norm, returning the pre-clip norm as a scalar f32 tensor on the gradients'
// device (for logging without forcing the caller to hold a host value).
// Note: deciding whether to scale still reads the squared norm back to the host once, because
// the op set has no "scale by a device scalar" op yet.
Tensor clip_grad_norm_tensor(FlatParameters& flat, double max_norm);

}  // namespace hg::optim
