// Global-norm gradient clipping over the flat gradient buffer, with PyTorch's
// torch.nn.utils.clip_grad_norm_ semantics (L2 norm, error_if_nonfinite=False):
//   total = ||grads||_2;  coef = max_norm / (total + 1e-6);  if coef < 1: grads *= coef
// One reduction and at most one scaling pass over the arena, however many parameters.
#pragma once

#include "hourglass/nn/flat_parameters.h"

namespace hg::optim {

// The L2 norm of all gradients (read back to the host: for tests and logs, not the step).
double grad_norm(const FlatParameters& flat);

// Clips in place and returns the norm before clipping (read back to the host, as grad_norm).
// A non-finite norm (NaN or inf gradient) leaves the gradients untouched and is returned as
// is, so the caller can skip the step. Throws InvalidInput when max_norm is not positive.
double clip_grad_norm(FlatParameters& flat, double max_norm);

// As clip_grad_norm, entirely on the gradients' device (ops::sum_squares, then
// ops::clip_grads_ decides and scales there): returns the pre-clip norm as a scalar f32 tensor
// on that device and never waits for it, so a training step can call it. The gradients come
// out bit-identical to clip_grad_norm's.
Tensor clip_grad_norm_tensor(FlatParameters& flat, double max_norm);

}  // namespace hg::optim
