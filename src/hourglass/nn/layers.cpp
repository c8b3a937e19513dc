#include "hourglass/nn/layers.h"

#include "hourglass/autograd/tape.h"
#include "hourglass/base/rng.h"

namespace hg::nn {

Conv2d::Conv2d(const Conv2dOptions& o) : Module("Conv2d"), options_(o) {
  HG_CHECK(o.in_channels > 0 && o.out_channels > 0 && o.kernel > 0 && o.groups > 0 &&
               o.in_channels % o.groups == 0 && o.out_channels % o.groups == 0,
           "Conv2d: bad options in={} out={} kernel={} groups={}", o.in_channels, o.out_channels,
           o.kernel, o.groups);
  params_ = {o.stride, o.stride, o.padding, o.padding, o.dilation, o.dilation, o.groups};
  weight = register_parameter(
      "weight", Tensor::zeros({o.out_channels, o.kernel, o.kernel, o.in_channels / o.groups}));
  if (o.bias) bias = register_parameter("bias", Tensor::zeros({o.out_channels}), Decay::Exempt);
}

Tensor Conv2d::forward(const Tensor& x) { return fn::conv2d(x, weight, bias, params_); }

BatchNorm2d::BatchNorm2d(int64_t channels, double momentum, double eps)
    : Module("BatchNorm2d"), momentum_(momentum), eps_(eps) {
  weight = register_parameter("weight", Tensor::full({channels}, 1.0), Decay::Exempt);
  bias = register_parameter("bias", Tensor::zeros({channels}), Decay::Exempt);
  running_mean = register_buffer("running_mean", Tensor::zeros({channels}));
  running_var = register_buffer("running_var", Tensor::full({channels}, 1.0));
}

std::pair<Tensor, Tensor> BatchNorm2d::running_statistics_for_pass() const {
  // A recomputed block's second forward pass (fn::recompute) computes the same batch
  // statistics; the running ones were updated by the first pass, so this one updates copies
  // that are dropped (two vectors of `channels` floats).
  if (is_training() && autograd::recomputing()) return {running_mean.clone(), running_var.clone()};
  return {running_mean, running_var};
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  auto [mean, var] = running_statistics_for_pass();
  if (sync != nullptr && is_training())
    return fn::batch_norm_synced(x, weight, bias, mean, var, momentum_, eps_, *sync);
  return fn::batch_norm(x, weight, bias, mean, var,
                        is_training() ? fn::BatchNormMode::Train : fn::BatchNormMode::Eval,
                        momentum_, eps_);
}

Tensor BatchNorm2d::forward_relu(const Tensor& x, const Tensor& residual) {
  if (!is_training() || sync != nullptr || !ops::fused_batch_norm()) {
    const Tensor y = forward(x);
    return fn::relu(residual.defined() ? fn::add(y, residual) : y);
  }
  auto [mean, var] = running_statistics_for_pass();
  return fn::batch_norm_relu(x, residual, weight, bias, mean, var, fn::BatchNormMode::Train,
                             momentum_, eps_);
}

Tensor BatchNorm2d::forward_relu_pair(const Tensor& x, BatchNorm2d& shortcut, const Tensor& x2) {
  if (!is_training() || !shortcut.is_training() || sync != nullptr || shortcut.sync != nullptr ||
      momentum_ != shortcut.momentum_ || eps_ != shortcut.eps_ || !ops::fused_batch_norm() ||
      !ops::fused_shortcut_batch_norm())
    return forward_relu(x, shortcut.forward(x2));
  auto [mean, var] = running_statistics_for_pass();
  auto [mean2, var2] = shortcut.running_statistics_for_pass();
  return fn::batch_norm_pair_relu(x, weight, bias, mean, var, x2, shortcut.weight, shortcut.bias,
                                  mean2, var2, momentum_, eps_);
}

void sync_batch_norm(Module& model, Communicator* comm) {
  model.for_each_module([comm](Module& m) {
    if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) bn->sync = comm;
  });
}

int64_t recompute_batch_norm_statistics(Module& model, int64_t batches,
                                        const std::function<Tensor(int64_t)>& input) {
  std::vector<std::pair<BatchNorm2d*, double>> layers;  // each with its own momentum
  model.for_each_module([&](Module& m) {
    if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) layers.emplace_back(bn, bn->momentum());
  });
  if (layers.empty() || batches <= 0) return int64_t(layers.size());
  const bool was_training = model.is_training();
  auto restore = [&] {
    for (auto& [bn, momentum] : layers) bn->set_momentum(momentum);
    model.train(was_training);
  };
  try {
    autograd::NoGradGuard no_grad;
    model.train();
    for (int64_t k = 0; k < batches; ++k) {
      for (auto& entry : layers) entry.first->set_momentum(1.0 / double(k + 1));
      (void)model.forward(input(k));
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return int64_t(layers.size());
}

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias) : Module("Linear") {
  HG_CHECK(in_features > 0 && out_features > 0, "Linear: bad sizes in={} out={}", in_features,
           out_features);
  weight = register_parameter("weight", Tensor::zeros({out_features, in_features}));
  if (has_bias) bias = register_parameter("bias", Tensor::zeros({out_features}), Decay::Exempt);
}

Tensor Linear::forward(const Tensor& x) { return fn::linear(x, weight, bias); }

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding) : Module("MaxPool2d") {
  params_ = {kernel, kernel, stride, stride, padding, padding};
}

AvgPool2d::AvgPool2d(int64_t kernel, int64_t stride, int64_t padding) : Module("AvgPool2d") {
  params_ = {kernel, kernel, stride, stride, padding, padding};
}

namespace {
thread_local DropoutContext t_dropout_context;
}  // namespace

void set_dropout_context(const DropoutContext& context) { t_dropout_context = context; }

Dropout::Dropout(double p, uint64_t layer_id) : Dropout("Dropout", p, layer_id) {}

Dropout::Dropout(const char* name, double p, uint64_t layer_id)
    : Module(name), p_(p), layer_id_(layer_id) {
  HG_CHECK(p >= 0.0 && p < 1.0, "{}: p must be in [0, 1), got {}", name, p);
}

uint64_t Dropout::mask_offset(uint64_t row_elements) const {
  // A 64-bit counter start per (step, layer), advanced by the micro-batch's first row: element
  // i of batch row r always uses counter base + r * row_elements + i. Ranges of different
  // (step, layer) pairs do not meet in practice (2^32 elements apart at least).
  const uint64_t base = mix_stream(t_dropout_context.step, layer_id_) & ~uint64_t(0xffffffff);
  return base + t_dropout_context.first_row * row_elements;
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  const uint64_t row_elements = x.dim() > 0 && x.size(0) > 0 ? uint64_t(x.numel() / x.size(0)) : 0;
  return fn::dropout(x, p_, t_dropout_context.seed, mask_offset(row_elements));
}

DropPath::DropPath(double p, uint64_t layer_id) : Dropout("DropPath", p, layer_id) {}

Tensor DropPath::forward(const Tensor& x) {
  if (!active()) return x;
  HG_CHECK(x.dim() >= 1, "DropPath: input {} has no rows", x.describe());
  // One counter per row: 0 or 1 / (1 - p), as dropout scales a kept element.
  const Tensor ones = Tensor::full({x.size(0)}, 1.0, DType::F32, x.device());
  const Tensor factors = ops::dropout(ones, p(), t_dropout_context.seed, mask_offset(1)).y;
  return fn::scale_rows(x, factors);
}

}  // namespace hg::nn
