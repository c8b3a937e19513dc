// The layers: one module per op of the autograd layer. Convolutions are NHWC in, NHWC out,
// weights KRSC. Parameters start uninitialised; models/initialize() fills them from a seed.
#pragma once

#include <functional>
#include <utility>

#include "hourglass/autograd/functions.h"
#include "hourglass/nn/module.h"

namespace hg::nn {

struct Conv2dOptions {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = false;
};

class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& o);
  Tensor forward(const Tensor& x) override;
  const Conv2dOptions& options() const { return options_; }
  Tensor weight, bias;  // bias undefined when options.bias is false

 private:
  Conv2dOptions options_;
  Conv2dParams params_;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double momentum = 0.1, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  // relu(forward(x) + residual), residual undefined for relu(forward(x)). In training, with no
  // synchronisation and ops::fused_batch_norm() on, one fused op (fn::batch_norm_relu);
  // otherwise the three steps. Both compute the same function.
  Tensor forward_relu(const Tensor& x, const Tensor& residual = Tensor());
  // relu(forward(x) + shortcut.forward(x2)): a downsampling residual block's end. In training,
  // with neither synchronised, the same momentum and eps, and ops::fused_batch_norm() and
  // ops::fused_shortcut_batch_norm() on, one fused op for both (fn::batch_norm_pair_relu);
  // otherwise forward_relu(x, shortcut.forward(x2)). Both compute the same function.
  Tensor forward_relu_pair(const Tensor& x, BatchNorm2d& shortcut, const Tensor& x2);
  Tensor weight, bias, running_mean, running_var;
  // The running statistics' update factor: running = (1 - momentum) * running + momentum * batch.
  double momentum() const { return momentum_; }
  void set_momentum(double momentum) { momentum_ = momentum; }
  // Synchronised batch norm (data parallelism): training statistics over the rows of every rank
  // of this communicator (fn::batch_norm_synced); null: this process's rows only.
  Communicator* sync = nullptr;

 private:
  // The running statistics a training pass updates: the buffers themselves, or copies that are
  // dropped in a recomputed block's second pass.
  std::pair<Tensor, Tensor> running_statistics_for_pass() const;
  double momentum_, eps_;
};

// Makes every BatchNorm2d of `model` synchronise over `comm` (null: stop synchronising).
void sync_batch_norm(Module& model, Communicator* comm);

// torch.optim.swa_utils.update_bn: recomputes the running statistics of every BatchNorm2d of
// `model` as the plain average of the batch statistics of `batches` forward passes in training
// mode, without a tape (pass k's momentum is 1 / (k + 1), so the first pass replaces what the
// statistics held). `input(k)` gives pass k's input. The model's mode and the layers' momenta
// are restored, whatever input or forward throws. Returns the number of batch norms updated.
int64_t recompute_batch_norm_statistics(Module& model, int64_t batches,
                                        const std::function<Tensor(int64_t)>& input);

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t in_features() const { return weight.size(1); }
  Tensor weight, bias;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override { return fn::relu(x); }
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override { return fn::tanh(x); }
};

class MaxPool2d : public Module {
 public:
  MaxPool2d(int64_t kernel, int64_t stride, int64_t padding = 0);
  Tensor forward(const Tensor& x) override { return fn::max_pool2d(x, params_); }
  const Pool2dParams& params() const { return params_; }

 private:
  Pool2dParams params_;
};

class AvgPool2d : public Module {
 public:
  AvgPool2d(int64_t kernel, int64_t stride, int64_t padding = 0);
  Tensor forward(const Tensor& x) override { return fn::avg_pool2d(x, params_); }

 private:
  Pool2dParams params_;
};

class GlobalAvgPool : public Module {
 public:
  GlobalAvgPool() : Module("GlobalAvgPool") {}
  Tensor forward(const Tensor& x) override { return fn::global_avg_pool(x); }
};

class Flatten : public Module {
 public:
  Flatten() : Module("Flatten") {}
  Tensor forward(const Tensor& x) override { return fn::flatten(x, 1); }
};

// Where dropout masks come from: Philox(seed) at a counter derived from the training step,
// the layer and the batch row, so a resumed run draws the same masks as an uninterrupted one,
// and a batch split into micro-batches (gradient accumulation, out-of-memory recovery) draws
// the same masks as the whole batch.
struct DropoutContext {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint64_t first_row = 0;  // the batch row the current micro-batch starts at
};
void set_dropout_context(const DropoutContext& context);

class Dropout : public Module {
 public:
  // `layer_id` tells the model's dropout layers apart (their position in it): masks depend on
  // it, never on how many models the process built before.
  Dropout(double p, uint64_t layer_id);
  Tensor forward(const Tensor& x) override;
  double p() const { return p_; }

 protected:
  Dropout(const char* name, double p, uint64_t layer_id);
  // The first Philox counter of x's masks in this step and micro-batch: a base per (step,
  // layer), advanced by the micro-batch's first row times `row_elements`, the counters one row
  // of x uses (see forward).
  uint64_t mask_offset(uint64_t row_elements) const;

 private:
  double p_;
  uint64_t layer_id_;
};

// Stochastic depth (Huang et al. 2016), as timm's DropPath: in training each sample (row) of x,
// a residual branch, is zeroed with probability p and scaled by 1 / (1 - p) otherwise;
// evaluation passes x through. A row's fate is dropout's rule for one counter per row (the
// dropout op over a column of ones, then fn::scale_rows), keyed like Dropout's masks, so a
// resumed run or another micro-batch split draws the same. Being a Dropout, it keeps a model's
// steps eager (its masks are keyed by the step on the host).
class DropPath : public Dropout {
 public:
  DropPath(double p, uint64_t layer_id);
  Tensor forward(const Tensor& x) override;
  // Whether forward changes x (training with p > 0).
  bool active() const { return is_training() && p() > 0.0; }
};

}  // namespace hg::nn
