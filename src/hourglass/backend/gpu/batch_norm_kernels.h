// Batch-norm kernels of the GPU backend (batch_norm_kernels.cu), called by batch_norm.cpp.
//
// The input is viewed as [rows, channels] (NHWC or [N,C], channels contiguous). Every kernel
// runs on a grid of (channel columns x row blocks): a thread owns `vec` consecutive channels
// (one 16-byte load per row where the channel count and alignment allow) and walks the rows
// of its block. Reductions keep per-thread (count, mean, M2) or plain sums, merge them in the
// block and write one partial per block and channel to a workspace. The statistics' partials
// are merged by a second kernel spread over the channels; the gradient sums' by the last block
// of each column to finish (a counter per column, reset by that block). Either merges in a
// fixed order and writes the per-channel results. Elementwise passes keep their per-channel
// coefficients in shared memory and walk the same row blocks backwards, starting on the rows
// the reduction before them left in L2. Nothing synchronises with the host; results depend
// only on the inputs and the plan (the plan on the shape, alignment and the GPU's SM count),
// so repeated runs give identical bits.
#pragma once

#include <cstdint>

#include "hourglass/backend/gpu/pooling_kernels.h"
#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// How the kernels cover a [rows, channels] input.
struct BatchNormPlan {
  int vec = 1;                 // consecutive channels per thread (1, 2, 4 or 8)
  int block_x = 1;             // threads across channel vectors
  int block_y = 1;             // threads across rows (block_x * block_y threads a block)
  int64_t columns = 1;         // blocks across channels: block_x * vec channels each
  int64_t row_blocks = 1;      // blocks across rows (= partials per channel of a reduction)
  int64_t rows_per_block = 1;  // rows per block (the last block may have fewer)
};

// The plan for an input of `rows` x `channels` elements of `dtype` on a GPU with `sm_count`
// multiprocessors. `address_bits` is the bitwise OR of the addresses of every [rows, channels]
// operand; vector loads are used only as wide as all of them are aligned.
BatchNormPlan batch_norm_plan(int64_t rows, int64_t channels, DType dtype, uint64_t address_bits,
                              int sm_count);

// Floats of workspace a reduction of this plan needs (two per partial and channel).
int64_t batch_norm_workspace_floats(const BatchNormPlan& plan, int64_t channels);

// Training forward. Computes per-channel batch mean and biased variance of x (Welford, merged
// with Chan's formula), writes save_mean and save_invstd = 1/sqrt(var + eps), updates
// running_mean / running_var in place with `momentum` (running_var with the unbiased
// variance), then y = (x - mean) * invstd * weight + bias in x's dtype: the statistics in two
// kernels, the blocks' partials and a merge of them spread over channels. All float pointers
// are [channels] except `workspace` (batch_norm_workspace_floats).
void batch_norm_train_launch(const BatchNormPlan& plan, DType dtype, const void* x, void* y,
                             int64_t rows, int64_t channels, const float* weight, const float* bias,
                             float* running_mean, float* running_var, double momentum, double eps,
                             float* save_mean, float* save_invstd, float* workspace,
                             gpuStream_t stream);

// Eval forward: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias.
void batch_norm_eval_launch(const BatchNormPlan& plan, DType dtype, const void* x, void* y,
                            int64_t rows, int64_t channels, const float* weight, const float* bias,
                            const float* running_mean, const float* running_var, double eps,
                            gpuStream_t stream);

// Backward from the saved statistics: dbias = sum dy, dweight = sum dy * xhat with
// xhat = (x - mean) * invstd, then dx = weight * invstd * (dy - dbias / M - xhat * dweight / M)
// in x's dtype (dy has x's dtype). `workspace` as for training; `counters` holds at least
// plan.columns zeros (and is left so).
void batch_norm_backward_launch(const BatchNormPlan& plan, DType dtype, const void* dy,
                                const void* x, void* dx, int64_t rows, int64_t channels,
                                const float* weight, const float* mean, const float* invstd,
                                float* dweight, float* dbias, float* workspace, unsigned* counters,
                                gpuStream_t stream);

// The backward's dx pass alone, from a gradient whose sums (dweight, dbias) a pass of its own
// computed as batch_norm_backward_launch's first pass does: dx as batch_norm_backward_launch
// computes it from dz.
void batch_norm_input_grad_launch(const BatchNormPlan& plan, DType dtype, const void* dz,
                                  const void* x, void* dx, int64_t rows, int64_t channels,
                                  const float* weight, const float* mean, const float* invstd,
                                  const float* dweight, const float* dbias, gpuStream_t stream);

// Bytes a row of a ReLU mask takes: one bit per channel, bit c % 8 of byte c / 8.
inline int64_t relu_mask_stride(int64_t channels) { return (channels + 7) / 8; }

// Fused training forward (batch_norm_relu_train): the statistics and running-statistic update
// of batch_norm_train_launch, then y = relu((x - mean) * invstd * weight + bias + residual) in
// one pass, computed in f32 and rounded once to x's dtype. `residual` (x's dtype and shape)
// may be null: no add. The plan's address_bits must include the residual. Also stores y's ReLU
// mask ([rows, relu_mask_stride(channels)] bytes, bit set where y > 0): in the same pass when
// the plan's threads own 8 channels, else from y in a pass of its own.
void batch_norm_relu_train_launch(const BatchNormPlan& plan, DType dtype, const void* x,
                                  const void* residual, void* y, uint8_t* mask, int64_t rows,
                                  int64_t channels, const float* weight, const float* bias,
                                  float* running_mean, float* running_var, double momentum,
                                  double eps, float* save_mean, float* save_invstd,
                                  float* workspace, gpuStream_t stream);

// The ReLU mask of y ([rows, channels] of `dtype`) as batch_norm_relu_train_launch stores it.
void relu_mask_launch(DType dtype, const void* y, uint8_t* mask, int64_t rows, int64_t channels,
                      gpuStream_t stream);

// Fused backward (batch_norm_relu_backward): batch_norm_backward_launch of dz = (y > 0 ? dy : 0)
// with the mask applied while loading. Without `dresidual` both passes mask dy; with it (x's
// dtype and shape) the reduction stores dz there and the dx pass reads dz alone. `mask` is the
// fused forward's ReLU mask. `dy2` (null, or dy's dtype and shape; only with `dresidual`): the
// output's gradient is dy + dy2, summed and rounded to the dtype while loading, as a separate
// add would (the two parts of a gradient that reached a value used twice).
void batch_norm_relu_backward_launch(const BatchNormPlan& plan, DType dtype, const void* dy,
                                     const void* dy2, const uint8_t* mask, const void* x, void* dx,
                                     void* dresidual, int64_t rows, int64_t channels,
                                     const float* weight, const float* mean, const float* invstd,
                                     float* dweight, float* dbias, float* workspace,
                                     unsigned* counters, gpuStream_t stream);

// ---- a pair of batch norms summed, then a ReLU (batch_norm_pair_kernels.cu): a downsampling
// residual block's last batch norm and its shortcut's, the shortcut's output never stored.

// One batch norm of a pair in training: its [channels] f32 parameters, running statistics
// (updated in place) and saved statistics (written).
struct BatchNormTrainPointers {
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* save_mean = nullptr;
  float* save_invstd = nullptr;
};

// One batch norm of a pair in backward: its weight and saved statistics (read) and its
// parameter gradients (written), all [channels] f32.
struct BatchNormGradPointers {
  const float* weight = nullptr;
  const float* mean = nullptr;
  const float* invstd = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
};

// Floats of workspace and counters a pair's backward needs (its reduction makes two sets of
// partials; the forward's two statistics passes run one after the other and need what one
// batch_norm_train_launch does).
int64_t batch_norm_pair_workspace_floats(const BatchNormPlan& plan, int64_t channels);
int64_t batch_norm_pair_counters(const BatchNormPlan& plan);

// y = relu(bn(x) + bn(x2)) in training: the statistics of x and of x2 as
// batch_norm_train_launch computes them (running statistics updated, saved statistics
// written), then one pass that normalises both, adds them in f32, applies the ReLU and rounds
// once to the dtype, storing y's ReLU mask as batch_norm_relu_train_launch does. x, x2 and y
// share the plan (its address_bits include all three).
void batch_norm_pair_relu_train_launch(const BatchNormPlan& plan, DType dtype, const void* x,
                                       const void* x2, void* y, uint8_t* mask, int64_t rows,
                                       int64_t channels, const BatchNormTrainPointers& first,
                                       const BatchNormTrainPointers& second, double momentum,
                                       double eps, float* workspace, gpuStream_t stream);

// Its backward: dz = (dy [+ dy2, rounded to the dtype]) where the mask's bit is set, else 0,
// stored to `dz` ([rows, channels] of the dtype, scratch) by a pass that also sums dz,
// dz * (x - mean) and dz * (x2 - mean2) per channel; then one pass writing dx and dx2 as
// batch_norm_backward_launch would from dz. `workspace` and `counters`:
// batch_norm_pair_workspace_floats and batch_norm_pair_counters (the counters zero, left so).
void batch_norm_pair_relu_backward_launch(const BatchNormPlan& plan, DType dtype, const void* dy,
                                          const void* dy2, const uint8_t* mask, const void* x,
                                          const void* x2, void* dz, void* dx, void* dx2,
                                          int64_t rows, int64_t channels,
                                          const BatchNormGradPointers& first,
                                          const BatchNormGradPointers& second, float* workspace,
                                          unsigned* counters, gpuStream_t stream);

}  // namespace hg::gpu
