// The op surface: hg::ops::<name>(...) for every op of the list (op_list.h, where each op's
// signature, documentation and checks are written) and the structs they return; the math
// settings they run under are in math_settings.h. Each op checks shapes, dtypes and devices
// (errors name the op and the operands) and dispatches to the backend of its inputs' device. These
// are raw ops with no autograd; autograd/functions.h wraps them into a differentiable API.
//
// Layouts: activations NHWC [N, H, W, C]; convolution weights KRSC [K, R, S, C/groups];
// linear weights [out, in]. Compute ops take f32 on the CPU (f32, bf16, f16 on GPUs).
#pragma once

#include "hourglass/ops/math_settings.h"
#include "hourglass/ops/params.h"
#include "hourglass/tensor/tensor.h"

namespace hg::ops {

// ---- results of the ops that return several tensors (the ops are in op_list.h) ----

struct Conv2dGrads {
  Tensor dx, dw, dbias;  // dx undefined when InputGrad::Skip, dbias when there is no bias
};
// ---- the training batch norm's fusions (ops::batch_norm_train, ops::batch_norm_backward) ----

// A second training batch norm whose output a fused one adds before its ReLU
// (BatchNormFusion::shortcut): a downsampling residual block's shortcut, whose normalised
// output is never stored. Its parameters have x's channels; its running statistics are updated
// in place, as the first batch norm's are.
struct BatchNormShortcut {
  Tensor x, weight, bias;
  Tensor running_mean, running_var;
};

// What batch_norm_train computes after normalising x, in the same passes over the data:
//   (nothing set)                y = bn(x)
//   relu                         y = relu(bn(x)), and y's ReLU mask
//   relu, residual               y = relu(bn(x) + residual)             (residual: x's shape)
//   relu, shortcut               y = relu(bn(x) + bn2(shortcut.x))      (both statistics saved)
// A residual or a shortcut only with relu, and not both.
struct BatchNormFusion {
  bool relu = false;
  Tensor residual;
  BatchNormShortcut shortcut;  // shortcut.x undefined: none
};

// The backward of a fused forward (batch_norm_backward), from what the forward saved:
//   relu_output: the forward's y or its ReLU mask (BatchNormForward::mask, 1/16 of y's bytes in
//     bf16): the gradient is first masked, dz = dy where y > 0, else 0. Undefined: no ReLU.
//   dy2: the output's gradient arrives in two parts and is dy + dy2, rounded to the dtype as
//     ops::add(dy, dy2) would (the tape hands both parts of a value used twice, a residual
//     block's output; the GPU sums them while loading). Only with relu_output.
//   residual_grad: Compute also returns dz as BatchNormGrads::dresidual (the residual's
//     gradient). Only with relu_output, not with a shortcut.
//   shortcut: the forward's shortcut batch norm (its input, weight and saved statistics): its
//     gradients come back as dx2, dweight2 and dbias2. Only with relu_output given as the mask.
struct BatchNormBackwardFusion {
  Tensor relu_output;
  Tensor dy2;
  ResidualGrad residual_grad = ResidualGrad::Skip;
  struct Shortcut {
    Tensor x, weight, mean, invstd;
  } shortcut;  // shortcut.x undefined: none
};

struct BatchNormForward {
  Tensor y;
  Tensor mean, invstd;  // [C] f32 batch statistics saved for backward
  // With BatchNormFusion::relu: y's ReLU mask, u8 [rows, relu_mask_bytes(C)] over y viewed as
  // [rows, C], bit c % 8 of byte c / 8 set where y > 0: what the backward reads in place of y.
  Tensor mask;
  Tensor mean2, invstd2;  // with a shortcut: [C] f32, its batch statistics
};

// Bytes a row of a ReLU mask (BatchNormForward::mask) takes for `channels` channels.
inline int64_t relu_mask_bytes(int64_t channels) { return (channels + 7) / 8; }
struct BatchNormGrads {
  Tensor dx, dweight, dbias;
  Tensor dresidual;  // with ResidualGrad::Compute: the masked gradient itself
  // With a shortcut: its gradients (dbias2 = dbias: both are the sum of the masked gradient).
  Tensor dx2, dweight2, dbias2;
};
struct MaxPoolForward {
  Tensor y;
  Tensor workspace;  // backend-specific record of the arg-max, for backward
};
struct LinearGrads {
  Tensor dx, dw, dbias;
};
struct CrossEntropyForward {
  Tensor loss;   // scalar f32: mean over the batch
  Tensor probs;  // [N,C] softmax, saved for backward
};
struct DropoutForward {
  Tensor y;
  Tensor mask;  // u8, 1 where kept
};
struct GatheredBatch {
  Tensor images;  // f32 [B,H,W,C], normalised (gather_batch without a table: u8 pixels)
  Tensor labels;  // i64 [B]; undefined when gathered without labels
};

// Elements of the dynamic loss scaler's f32 state tensor (unscale_grads_, update_loss_scale_).
inline constexpr int64_t kLossScaleState = 3;

// ---- every op of the list, with its default arguments ----
#define HG_OP(ret, name, params, ...) ret name params;
#define HG_COMPOSITE_OP(ret, name, params, ...) ret name params;
#define HG_OP_DEFAULT(value) = value
#include "hourglass/ops/op_list.h"

}  // namespace hg::ops
