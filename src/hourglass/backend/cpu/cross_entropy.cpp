#include "hourglass/backend/cpu/cpu_backend.h"

namespace hg {

ops::CrossEntropyForward CpuBackend::cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing) {
  HG_ASSERT(false, "cpu cross_entropy: not implemented yet");
}

Tensor CpuBackend::cross_entropy_backward(const Tensor& dloss, const Tensor& probs, const Tensor& labels, double label_smoothing) {
  HG_ASSERT(false, "cpu cross_entropy_backward: not implemented yet");
}

Tensor CpuBackend::count_correct(const Tensor& logits, const Tensor& labels) {
  HG_ASSERT(false, "cpu count_correct: not implemented yet");
}

}  // namespace hg
