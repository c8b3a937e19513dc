// The flat parameter arena (decision 3): moves every parameter of a model into one contiguous
// f32 buffer and gives each a gradient view into a second one, so the optimizer step, zeroing,
// clipping, all-reduce buckets and checkpoint writes are a few large contiguous operations.
// Parameters that take weight decay come first.
#pragma once

#include "hourglass/nn/flat_parameters.h"
#include "hourglass/nn/module.h"

namespace hg::nn {

// Which parameters take weight decay.
enum class DecayScope : uint8_t {
  All,          // every parameter (PyTorch's default)
  WeightsOnly,  // exempt batch-norm affine parameters and biases
};

// Rebinds the model's parameters into the arena (values kept) and sets each parameter's grad
// to its view of the zeroed gradient buffer; rebinds its f32 buffers into FlatParameters::
// buffers the same way. Afterwards the model's tensors are views: code holding a parameter or
// buffer handle sees the arena memory.
FlatParameters build_parameter_arena(Module& model, DecayScope scope);

}  // namespace hg::nn
