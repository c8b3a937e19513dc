// Softmax cross-entropy, its backward and the correct count on the GPU
// (cross_entropy_kernels.cu). Logits may be f32, bf16 or f16; probabilities are saved in the
// logits' dtype (so the gradient comes back in it, as the CPU backend's does), the loss and the
// count are f32 scalars on the device. Labels are checked on the device, not here: a label out
// of range makes its row's loss, gradient and hit NaN instead of throwing (see the header).
#include "hourglass/backend/gpu/cross_entropy_kernels.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

namespace {

// Class indices travel through the arg-max reduction as floats.
constexpr int64_t kMaxClasses = int64_t(1) << 24;

void check_labels(const char* op, const Tensor& labels, const Tensor& logits) {
  check_dtype(op, "labels", labels, DType::I64);
  check_same_device(op, logits, labels);
  HG_CHECK(labels.dim() == 1 && labels.size(0) == logits.size(0) && labels.is_contiguous(),
           "{}: labels {} do not match {}", op, labels.describe(), logits.describe());
}

}  // namespace

ops::CrossEntropyForward GpuBackend::cross_entropy(const Tensor& logits, const Tensor& labels,
                                                   double label_smoothing) {
  const char* op = "cross_entropy";
  gpu::check_float(op, logits);
  check_labels(op, labels, logits);
  const int64_t rows = logits.size(0), classes = logits.size(1);
  HG_CHECK(classes > 0, "{}: logits {} have no classes", op, logits.describe());
  HG_CHECK(rows > 0, "{}: empty batch", op);
  const gpuStream_t stream = gpu::stream_for(logits);
  ops::CrossEntropyForward out;
  out.probs = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  out.loss = Tensor::empty({}, DType::F32, logits.device());
  Tensor row_loss = Tensor::empty({rows}, DType::F32, logits.device());
  const double on = 1.0 - label_smoothing, uniform = label_smoothing / double(classes);
  gpu::launch_cross_entropy(logits.data_ptr(), static_cast<const int64_t*>(labels.data_ptr()), rows,
                            classes, float(on), float(uniform), logits.dtype(),
                            out.probs.data_ptr(), static_cast<float*>(row_loss.data_ptr()),
                            static_cast<float*>(out.loss.data_ptr()), stream);
  return out;
}

Tensor GpuBackend::cross_entropy_backward(const Tensor& dloss, const Tensor& probs0,
                                          const Tensor& labels, double label_smoothing) {
  const char* op = "cross_entropy_backward";
  gpu::check_float(op, probs0);
  HG_CHECK(probs0.dim() == 2, "{}: probabilities must be [N,C], got {}", op, probs0.describe());
  check_labels(op, labels, probs0);
  check_dtype(op, "grad of the loss", dloss, DType::F32);
  check_same_device(op, probs0, dloss);
  const Tensor probs = probs0.contiguous();
  const Tensor dl = dloss.contiguous();
  const int64_t rows = probs.size(0), classes = probs.size(1);
  Tensor dx = Tensor::empty(probs.shape(), probs.dtype(), probs.device());
  if (dx.numel() == 0) return dx;
  // The CPU's targets: uniform off the label, on + uniform at it, each rounded once.
  const double on = 1.0 - label_smoothing, uniform = label_smoothing / double(classes);
  gpu::launch_cross_entropy_backward(static_cast<const float*>(dl.data_ptr()), probs.data_ptr(),
                                     static_cast<const int64_t*>(labels.data_ptr()), rows, classes,
                                     float(uniform), float(on + uniform), probs.dtype(),
                                     dx.data_ptr(), gpu::stream_for(probs));
  return dx;
}

Tensor GpuBackend::count_correct(const Tensor& logits, const Tensor& labels, int64_t k) {
  const char* op = "count_correct";
  gpu::check_float(op, logits);
  check_labels(op, labels, logits);
  const int64_t rows = logits.size(0), classes = logits.size(1);
  if (rows > 0)
    HG_CHECK(classes > 0 && classes < kMaxClasses, "{}: logits {} must have 1 to {} classes", op,
             logits.describe(), kMaxClasses - 1);
  const gpuStream_t stream = gpu::stream_for(logits);
  Tensor out = Tensor::empty({}, DType::F32, logits.device());
  Tensor row_hit;
  if (rows > 0) row_hit = Tensor::empty({rows}, DType::F32, logits.device());
  gpu::launch_count_correct(rows > 0 ? logits.data_ptr() : nullptr,
                            rows > 0 ? static_cast<const int64_t*>(labels.data_ptr()) : nullptr,
                            rows, classes, k, logits.dtype(),
                            rows > 0 ? static_cast<float*>(row_hit.data_ptr()) : nullptr,
                            static_cast<float*>(out.data_ptr()), stream);
  return out;
}

}  // namespace hg
