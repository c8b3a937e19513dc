// Differentiable functions: each runs the raw op from ops.h and, when recording, puts one
// node on the tape whose backward calls the op's backward. Layers in nn/ are built from these.
// Those whose node is one formula per input are declared in derivatives.toml and generated
// (derivatives_generated.h: relu, sqrt, add, mul, the pools, ...); those below are written by
// hand (functions.cpp).
#pragma once

#include "hourglass/autograd/derivatives_generated.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/dist/comm.h"
#include "hourglass/ops/ops.h"

namespace hg::fn {

// x converted to `dtype`; the gradient flows back converted to x's dtype. x itself when it
// already has that dtype.
Tensor cast(const Tensor& x, DType dtype);

// conv2d, linear and cross_entropy follow the thread's autocast policy (tape.h).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p);
// Training mode normalises with batch statistics and updates the running ones.
enum class BatchNormMode : uint8_t { Train, Eval };
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                  Tensor& running_var, BatchNormMode mode, double momentum, double eps);
// relu(batch_norm(x) + residual) (residual undefined: relu(batch_norm(x))). Training mode runs
// the fused op (ops::batch_norm_train with a ReLU) and records one node with the gradients of
// x, weight, bias and residual (ops::batch_norm_backward with the ReLU mask); eval mode runs
// batch_norm_eval, add and relu (eval is not differentiable, as in batch_norm).
Tensor batch_norm_relu(const Tensor& x, const Tensor& residual, const Tensor& weight,
                       const Tensor& bias, Tensor& running_mean, Tensor& running_var,
                       BatchNormMode mode, double momentum, double eps);
// relu(batch_norm(x) + batch_norm(x2)) in training mode, each batch norm with its own
// parameters and running statistics: one fused op (ops::batch_norm_train with a ReLU and a
// shortcut) and one node with the gradients of x, weight, bias, x2, weight2, bias2
// (ops::batch_norm_backward with the ReLU mask and the shortcut).
Tensor batch_norm_pair_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            Tensor& running_mean, Tensor& running_var, const Tensor& x2,
                            const Tensor& weight2, const Tensor& bias2, Tensor& running_mean2,
                            Tensor& running_var2, double momentum, double eps);
// Training-mode batch norm with the statistics of every rank's rows (synchronised batch norm):
// the ranks' means and variances are combined through `comm` (all ranks call it for the same
// layers in the same order), the running statistics take the combined ones, and backward sums
// the per-channel gradient terms over the ranks too, so N ranks normalise as one process does
// on all their rows. The returned weight and bias gradients are this rank's parts (data
// parallelism sums them with the others). The combination is done in f64 on the host: on a GPU
// each call waits for the device twice (forward and backward).
Tensor batch_norm_synced(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                         Communicator& comm);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias);
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 1);
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);
// Mean softmax cross-entropy of logits [N,C] against i64 labels [N].
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing = 0.0);
// Identity unless p > 0; the mask comes from Philox(seed, offset + element index).
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);

}  // namespace hg::fn
