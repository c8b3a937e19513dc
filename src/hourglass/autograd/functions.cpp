#include "hourglass/autograd/functions.h"

namespace hg::fn {

using autograd::Tape;

namespace {
InputGrad input_grad_for(const Tensor& x) {
  return x.requires_grad() ? InputGrad::Compute : InputGrad::Skip;
}

// The operand a matrix op computes with under the autocast policy: a parameter's copy in the
// compute dtype where the policy has one, else a cast.
Tensor autocast_operand(const Tensor& t) {
  const autograd::AutocastPolicy& policy = autograd::autocast();
  if (!policy.enabled || !t.defined() || !is_floating(t.dtype()) || t.dtype() == policy.compute)
    return t;
  if (policy.copies != nullptr) {
    const auto it = policy.copies->find(t.impl_ptr()->id);
    if (it != policy.copies->end()) {
      Tensor y = it->second.view(t.shape());  // a handle of its own, as a cast's result is
      Tape& tape = Tape::current();
      if (tape.should_record({&t})) tape.record_cast(t, y);
      return y;
    }
  }
  return cast(t, policy.compute);
}
}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor y = x.to(dtype);
  Tape& tape = Tape::current();
  if (tape.should_record({&x})) tape.record_cast(x, y);
  return y;
}

Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& bias0, const Conv2dParams& p) {
  const Tensor x = autocast_operand(x0), w = autocast_operand(w0), bias = autocast_operand(bias0);
  Tensor y = ops::conv2d(x, w, bias, p);
  Tape& tape = Tape::current();
  if (tape.should_record({&x, &w, &bias})) {
    const bool has_bias = bias.defined();
    tape.record("conv2d", {x, w, bias}, y, [x, w, has_bias, p](const Tensor& dy) {
      auto g = ops::conv2d_backward(dy, x, w, has_bias, p, input_grad_for(x));
      return std::vector<Tensor>{g.dx, g.dw, g.dbias};
    });
  }
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                  Tensor& running_var, BatchNormMode mode, double momentum, double eps) {
  if (mode == BatchNormMode::Eval) {
    Tensor y = ops::batch_norm_eval(x, weight, bias, running_mean, running_var, eps);
    Tape& tape = Tape::current();
    if (tape.should_record({&x, &weight, &bias})) {
      tape.record(
          "batch_norm_eval", {x, weight, bias}, y, [](const Tensor&) -> std::vector<Tensor> {
            throw_invalid("backward through batch_norm in eval mode is not supported",
                          "call train() on the model before a training step, or run evaluation "
                          "under a no-grad guard");
          });
    }
    return y;
  }
  auto f = ops::batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps);
  Tape& tape = Tape::current();
  if (tape.should_record({&x, &weight, &bias})) {
    Tensor mean = f.mean, invstd = f.invstd;
    tape.record("batch_norm", {x, weight, bias}, f.y, [x, weight, mean, invstd](const Tensor& dy) {
      auto g = ops::batch_norm_backward(dy, x, weight, mean, invstd);
      return std::vector<Tensor>{g.dx, g.dweight, g.dbias};
    });
  }
  return f.y;
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& residual, const Tensor& weight,
                       const Tensor& bias, Tensor& running_mean, Tensor& running_var,
                       BatchNormMode mode, double momentum, double eps) {
  if (mode == BatchNormMode::Eval) {
    const Tensor y = batch_norm(x, weight, bias, running_mean, running_var, mode, momentum, eps);
    return relu(residual.defined() ? add(y, residual) : y);
  }
  auto f = ops::batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps,
                                 {.relu = true, .residual = residual});
  Tape& tape = Tape::current();
  if (tape.should_record({&x, &weight, &bias, &residual})) {
    // The backward needs y only for its ReLU mask (y > 0): the op's bits (the GPU's), or y
    // itself, which the next convolution keeps anyway (engine.relu_mask_bits = false: less
    // memory at the backward's peak, more bytes read by the backward).
    Tensor mask = f.mask.defined() && ops::relu_mask_bits() ? f.mask : f.y, mean = f.mean,
           invstd = f.invstd;
    const ResidualGrad residual_grad =
        residual.defined() ? ResidualGrad::Compute : ResidualGrad::Skip;
    auto backward_sum = [x, mask, weight, mean, invstd, residual_grad](const Tensor& dy,
                                                                       const Tensor& dy2) {
      auto g = ops::batch_norm_backward(
          dy, x, weight, mean, invstd,
          {.relu_output = mask, .dy2 = dy2, .residual_grad = residual_grad});
      return std::vector<Tensor>{g.dx, g.dweight, g.dbias, g.dresidual};
    };
    // A residual block's output feeds the next block and its shortcut: the two parts of its
    // gradient go to the backward whole, which sums them where it stores the residual's.
    tape.record(
        "batch_norm_relu", {x, weight, bias, residual}, f.y,
        [backward_sum](const Tensor& dy) { return backward_sum(dy, Tensor()); },
        residual.defined() && ops::fused_gradient_sum() ? autograd::BackwardSumFn(backward_sum)
                                                        : autograd::BackwardSumFn());
  }
  return f.y;
}

Tensor batch_norm_pair_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            Tensor& running_mean, Tensor& running_var, const Tensor& x2,
                            const Tensor& weight2, const Tensor& bias2, Tensor& running_mean2,
                            Tensor& running_var2, double momentum, double eps) {
  auto f = ops::batch_norm_train(
      x, weight, bias, running_mean, running_var, momentum, eps,
      {.relu = true, .shortcut = {x2, weight2, bias2, running_mean2, running_var2}});
  Tape& tape = Tape::current();
  if (tape.should_record({&x, &weight, &bias, &x2, &weight2, &bias2})) {
    Tensor mask = f.mask, mean = f.mean, invstd = f.invstd, mean2 = f.mean2, invstd2 = f.invstd2;
    auto backward_sum = [=](const Tensor& dy, const Tensor& dy2) {
      auto g = ops::batch_norm_backward(
          dy, x, weight, mean, invstd,
          {.relu_output = mask, .dy2 = dy2, .shortcut = {x2, weight2, mean2, invstd2}});
      return std::vector<Tensor>{g.dx, g.dweight, g.dbias, g.dx2, g.dweight2, g.dbias2};
    };
    // The block's output feeds the next block and its shortcut, as batch_norm_relu's does.
    tape.record(
        "batch_norm_pair_relu", {x, weight, bias, x2, weight2, bias2}, f.y,
        [backward_sum](const Tensor& dy) { return backward_sum(dy, Tensor()); },
        ops::fused_gradient_sum() ? autograd::BackwardSumFn(backward_sum)
                                  : autograd::BackwardSumFn());
  }
  return f.y;
}

Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& bias0) {
  const Tensor x = autocast_operand(x0), w = autocast_operand(w0), bias = autocast_operand(bias0);
  Tensor y = ops::linear(x, w, bias);
  Tape& tape = Tape::current();
  if (tape.should_record({&x, &w, &bias})) {
    const bool has_bias = bias.defined();
    tape.record("linear", {x, w, bias}, y, [x, w, has_bias](const Tensor& dy) {
      auto g = ops::linear_backward(dy, x, w, has_bias, input_grad_for(x));
      return std::vector<Tensor>{g.dx, g.dw, g.dbias};
    });
  }
  return y;
}

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p) {
  auto f = ops::max_pool2d(x, p);
  Tape& tape = Tape::current();
  if (tape.should_record({&x})) {
    Tensor ws = f.workspace;
    tape.record("max_pool2d", {x}, f.y, [x, ws, p](const Tensor& dy) {
      return std::vector<Tensor>{ops::max_pool2d_backward(dy, x, ws, p)};
    });
  }
  return f.y;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  // Always a new impl, so the tape can tell the reshaped value from its input.
  Tensor y = x.contiguous().view(shape);
  Tape& tape = Tape::current();
  if (tape.should_record({&x})) {
    const Shape in_shape = x.shape();
    tape.record("reshape", {x}, y,
                [in_shape](const Tensor& dy) { return std::vector<Tensor>{dy.reshape(in_shape)}; });
  }
  return y;
}

Tensor flatten(const Tensor& x, int64_t start_dim) {
  Shape s(x.shape().begin(), x.shape().begin() + start_dim);
  s.push_back(-1);
  return reshape(x, s);
}

Tensor sum(const Tensor& x) {
  Tensor y = ops::sum(x);
  Tape& tape = Tape::current();
  if (tape.should_record({&x})) {
    const Shape shape = x.shape();
    const DType dtype = x.dtype();
    const Device device = x.device();
    tape.record("sum", {x}, y, [shape, dtype, device](const Tensor& dy) {
      return std::vector<Tensor>{Tensor::full(shape, dy.item(), dtype, device)};
    });
  }
  return y;
}

Tensor mean(const Tensor& x) {
  const double n = double(x.numel());
  return mul_scalar(sum(x), 1.0 / n);
}

Tensor cross_entropy(const Tensor& logits0, const Tensor& labels, double label_smoothing) {
  // Losses are computed in f32 under mixed precision.
  const Tensor logits = autograd::autocast().enabled ? cast(logits0, DType::F32) : logits0;
  auto f = ops::cross_entropy(logits, labels, label_smoothing);
  Tape& tape = Tape::current();
  if (tape.should_record({&logits})) {
    Tensor probs = f.probs;
    tape.record("cross_entropy", {logits}, f.loss,
                [probs, labels, label_smoothing](const Tensor& dl) {
                  return std::vector<Tensor>{
                      ops::cross_entropy_backward(dl, probs, labels, label_smoothing)};
                });
  }
  return f.loss;
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  if (p == 0.0) return x;
  auto f = ops::dropout(x, p, seed, offset);
  Tape& tape = Tape::current();
  if (tape.should_record({&x})) {
    Tensor mask = f.mask;
    tape.record("dropout", {x}, f.y, [mask, p](const Tensor& dy) {
      return std::vector<Tensor>{ops::dropout_backward(dy, mask, p)};
    });
  }
  return f.y;
}

}  // namespace hg::fn
