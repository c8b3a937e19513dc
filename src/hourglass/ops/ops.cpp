// The public ops: the check helpers their bodies use, then the bodies of the list (op_list.h)
// expanded into the definitions of hg::ops::<name>.
#include "hourglass/ops/ops.h"

#include <cmath>
#include <string>
#include <utility>

#include "hourglass/ops/backend.h"
#include "hourglass/ops/op_profile.h"

namespace hg::ops {

// Checks shared by the op bodies of op_list.h; each takes the op's name for its message.
namespace {

void check_float(const char* op, const char* what, const Tensor& t) {
  HG_CHECK(t.defined(), "{}: {} is undefined", op, what);
  HG_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64 || t.dtype() == DType::BF16 ||
               t.dtype() == DType::F16,
           "{}: {} must be a floating tensor, got {}", op, what, t.describe());
}

// An s8 or u8 tensor (the INT8 ops' activations).
void check_int8(const char* op, const char* what, const Tensor& t) {
  HG_CHECK(t.defined(), "{}: {} is undefined", op, what);
  HG_CHECK(t.dtype() == DType::I8 || t.dtype() == DType::U8, "{}: {} must be i8 or u8, got {}", op,
           what, t.describe());
}

void check_vector(const char* op, const char* what, const Tensor& t, int64_t n) {
  HG_CHECK(t.dim() == 1 && t.size(0) == n, "{}: {} must have shape [{}], got {}", op, what, n,
           t.describe());
}

// Channel count of a batch-norm input: NHWC or [N,C].
int64_t bn_channels(const char* op, const Tensor& x) {
  HG_CHECK(x.dim() == 4 || x.dim() == 2, "{}: input must be [N,H,W,C] or [N,C], got {}", op,
           x.describe());
  return x.size(-1);
}

// A training batch norm's input and its f32 [C] parameters and running statistics on its
// device, with more than one value per channel. `which` prefixes the operands' names ("shortcut "
// for a fused shortcut batch norm).
void check_batch_norm_train(const char* op, const char* which, const Tensor& x,
                            const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                            const Tensor& running_var) {
  const std::string prefix = which;
  check_float(op, (prefix + "input").c_str(), x);
  const int64_t c = bn_channels(op, x);
  check_vector(op, (prefix + "weight").c_str(), weight, c);
  check_vector(op, (prefix + "bias").c_str(), bias, c);
  check_vector(op, (prefix + "running_mean").c_str(), running_mean, c);
  check_vector(op, (prefix + "running_var").c_str(), running_var, c);
  for (const Tensor* t :
       std::initializer_list<const Tensor*>{&weight, &bias, &running_mean, &running_var}) {
    check_dtype(op, (prefix + "parameters and statistics").c_str(), *t, DType::F32);
    check_same_device(op, x, *t);
  }
  HG_CHECK(x.numel() / c > 1, "{}: training needs more than one value per channel, got {}", op,
           x.describe());
}

void check_pool(const char* op, const Tensor& x, const Pool2dParams& p) {
  check_dim(op, "input", x, 4);
  HG_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 &&
               p.pad_w >= 0,
           "{}: kernel and stride must be positive and padding non-negative", op);
  HG_CHECK(p.pad_h * 2 <= p.kernel_h && p.pad_w * 2 <= p.kernel_w,
           "{}: padding ({},{}) must be at most half the kernel ({},{})", op, p.pad_h, p.pad_w,
           p.kernel_h, p.kernel_w);
  const int64_t oh = conv_out_size(x.size(1), p.kernel_h, p.stride_h, p.pad_h);
  const int64_t ow = conv_out_size(x.size(2), p.kernel_w, p.stride_w, p.pad_w);
  HG_CHECK(oh > 0 && ow > 0, "{}: kernel {}x{} does not fit input {}", op, p.kernel_h, p.kernel_w,
           x.describe());
}

void check_binary(const char* op, const Tensor& a, const Tensor& b) {
  check_float(op, "lhs", a);
  check_float(op, "rhs", b);
  check_same_shape(op, a, b);
  check_same_dtype(op, a, b);
  check_same_device(op, a, b);
}

void check_relu_mask(const char* op, const Tensor& x, const Tensor& y_or_mask) {
  if (y_or_mask.dtype() != DType::U8) return check_binary(op, x, y_or_mask);
  const int64_t c = x.dim() > 0 ? x.size(-1) : 1, rows = c > 0 ? x.numel() / c : 0;
  HG_CHECK((y_or_mask.shape() == Shape{rows, relu_mask_bytes(c)}),
           "{}: ReLU mask {} must be u8 [{}, {}] for input {}", op, y_or_mask.describe(), rows,
           relu_mask_bytes(c), x.describe());
  check_same_device(op, x, y_or_mask);
}

void check_logits_labels(const char* op, const Tensor& logits, const Tensor& labels) {
  check_float(op, "logits", logits);
  check_dim(op, "logits [N,C]", logits, 2);
  check_dtype(op, "labels", labels, DType::I64);
  HG_CHECK(labels.dim() == 1 && labels.size(0) == logits.size(0),
           "{}: labels {} do not match logits {}", op, labels.describe(), logits.describe());
  check_same_device(op, logits, labels);
}

void check_flat(const char* op, const Tensor& ref, std::initializer_list<const Tensor*> others) {
  check_dtype(op, "parameters", ref, DType::F32);
  HG_CHECK(ref.is_contiguous(), "{}: parameters must be contiguous", op);
  for (const Tensor* t : others) {
    check_dtype(op, "optimizer operand", *t, DType::F32);
    check_same_shape(op, ref, *t);
    check_same_device(op, ref, *t);
    HG_CHECK(t->is_contiguous(), "{}: operand {} must be contiguous", op, t->describe());
  }
}

void check_skip(const char* op, const Tensor& params, const Tensor& skip) {
  if (!skip.defined()) return;
  HG_CHECK(skip.numel() == 1, "{}: skip flag must have one element, got {}", op, skip.describe());
  check_dtype(op, "skip flag", skip, DType::F32);
  check_same_device(op, params, skip);
}

// A learning rate held on the device, as sgd_step and adamw_step take it.
void check_lr(const char* op, const Tensor& params, const Tensor& lr) {
  if (!lr.defined()) return;
  HG_CHECK(lr.numel() == 1, "{}: lr must be a one-element f64 tensor, got {}", op, lr.describe());
  check_dtype(op, "lr", lr, DType::F64);
  check_same_device(op, params, lr);
}

// The optimizer's count of applied updates, as adamw_step and advance_step_ take it.
void check_step(const char* op, const Tensor& params, const Tensor& step) {
  HG_CHECK(step.defined() && step.numel() == 1,
           "{}: step must be a one-element f32 tensor (the optimizer's count of applied updates), "
           "got {}",
           op, step.describe());
  check_dtype(op, "step", step, DType::F32);
  check_same_device(op, params, step);
}

void check_scaler_state(const char* op, const Tensor& state) {
  check_dtype(op, "loss-scale state", state, DType::F32);
  HG_CHECK(state.dim() == 1 && state.size(0) == kLossScaleState && state.is_contiguous(),
           "{}: loss-scale state must be a contiguous [{}] tensor, got {}", op, kLossScaleState,
           state.describe());
}

Tensor contig(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

}  // namespace

// `op` is the op's name, for the body's error messages. HG_OP_COST(expr) records what the call
// asks of the device (op_cost.h) while a profiler records; `expr` is not evaluated otherwise.
#define HG_OP(ret, name, params, ...)                  \
  ret name params {                                    \
    [[maybe_unused]] constexpr const char* op = #name; \
    OpScope profiled(op);                              \
    __VA_ARGS__                                        \
  }
#define HG_OP_COST(...) \
  if (profiled.recording()) profiled.set_cost(__VA_ARGS__)
#define HG_OP_PROFILE_NAME(...) \
  if (profiled.recording()) profiled.set_name(__VA_ARGS__)
#define HG_COMPOSITE_OP HG_OP
#include "hourglass/ops/op_list.h"

}  // namespace hg::ops
