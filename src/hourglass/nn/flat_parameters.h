// The view of a model's parameters an optimizer works on: the flat parameter arena
// (decision 3), built by nn/parameter_arena.h and read by optim/. params and grads are
// contiguous f32 tensors of equal length; the first `decay_count` elements take weight decay,
// the rest (batch-norm affine parameters and biases, when the model asks for that) do not.
#pragma once

#include <cstdint>
#include <vector>

#include "hourglass/tensor/tensor.h"

namespace hg {

struct FlatParameters {
  Tensor params;  // f32 [n]
  // f32 [n]. Between training steps its storage may be released (engine.release_gradients,
  // Optimizer::zero_grad_releasing_memory), taken back zeroed when a backward first writes it.
  Tensor grads;
  int64_t decay_count = 0;  // params[0, decay_count) take weight decay
  // Where each parameter tensor starts in the arena, in arena order, then the arena's length
  // (decay_count is one of them): layer-wise optimizers (LARS) adapt each tensor's step.
  std::vector<int64_t> offsets;
  // f32 [m]: the model's f32 buffers (batch-norm running statistics) in one block, so a
  // snapshot of them is one copy; undefined when the model has none.
  Tensor buffers;
};

}  // namespace hg
