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
struct BatchNormForward {
  Tensor y;
  Tensor mean, invstd;  // [C] f32 batch statistics saved for backward
  // batch_norm_relu_train only: y's ReLU mask, u8 [rows, relu_mask_bytes(C)] over y viewed as
  // [rows, C], bit c % 8 of byte c / 8 set where y > 0: what its backward reads in place of y
  // (1/16 of y's bytes in bf16).
  Tensor mask;
};

// Bytes a row of a ReLU mask (BatchNormForward::mask) takes for `channels` channels.
inline int64_t relu_mask_bytes(int64_t channels) { return (channels + 7) / 8; }
struct BatchNormGrads {
  Tensor dx, dweight, dbias;
};
// batch_norm_pair_relu_train: y = relu(bn(x) + bn(x2)), y's ReLU mask and both inputs' saved
// batch statistics.
struct BatchNormPairForward {
  Tensor y;
  Tensor mask;            // as BatchNormForward::mask
  Tensor mean, invstd;    // [C] f32, x's batch statistics
  Tensor mean2, invstd2;  // [C] f32, x2's
};
struct BatchNormPairGrads {
  Tensor dx, dweight, dbias;     // x's batch norm
  Tensor dx2, dweight2, dbias2;  // x2's (dbias2 = dbias: both are the sum of the masked gradient)
};
struct BatchNormReluGrads {
  Tensor dx, dweight, dbias;
  Tensor dresidual;  // the masked gradient itself; undefined when ResidualGrad::Skip
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
  Tensor images;  // f32 [B,H,W,C], normalised
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
