// What an op call asks of the device, from its arguments, for the op profiler's achieved rates
// (TFLOP/s, GB/s; obs/op_profile_report.h): the FLOPs of the ops that are mostly math
// (convolutions and linear layers, a multiply-add counted as two) and the bytes every main op
// must move at least (each operand read once, each result written once, per pass of a
// backward). Computed only while a profiler records (op_list.h's bodies, HG_OP_COST in
// ops.cpp): the off path never calls these.
#pragma once

#include "hourglass/device/device_peaks.h"
#include "hourglass/ops/params.h"
#include "hourglass/tensor/tensor.h"

namespace hg::ops {

struct OpCost {
  double flops = 0;  // 0: not a math op (the table shows no TFLOP/s)
  double bytes = 0;
  MathPrecision precision = MathPrecision::None;  // what the FLOPs run as
};

// x [N,H,W,C], w [K,R,S,C/groups] -> y [N,P,Q,K]: 2*N*P*Q*K*(C/groups)*R*S FLOPs; x, w, bias
// read, y written.
OpCost conv2d_cost(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
// The weight gradient (2*N*P*Q*K*(C/groups)*R*S: reads dy and x, writes dw) and, with
// InputGrad::Compute, the input gradient (as many FLOPs: reads dy and w, writes dx); the bias
// gradient adds N*P*Q*K additions and K values written.
OpCost conv2d_backward_cost(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            InputGrad input_grad);
// x [N,in], w [out,in] -> [N,out]: 2*N*in*out FLOPs.
OpCost linear_cost(const Tensor& x, const Tensor& w, const Tensor& bias);
// dw = dy^T x and, with InputGrad::Compute, dx = dy w: 2*N*in*out FLOPs each.
OpCost linear_backward_cost(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias,
                            InputGrad input_grad);
// Bytes only: an op over `x`'s elements that reads `reads` tensors of its size and writes
// `writes` (batch norm: x read, y written; its backward: dy and x read, dx written; a binary
// elementwise op: two read, one written).
OpCost elementwise_cost(const Tensor& x, int reads, int writes);

// The precision a matrix product on `dtype` runs as on this thread (f32 as tf32 when the math
// settings allow it).
MathPrecision matmul_precision(DType dtype);

}  // namespace hg::ops
