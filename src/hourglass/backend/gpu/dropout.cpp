// Dropout on the GPU (f32, bf16, f16). The mask is the CPU backend's bit for bit (the same
// Philox4x32-10 rule, see dropout_kernels.h), so masks agree across devices and a resumed run
// recomputes any step's mask from its (seed, offset).
#include <cmath>

#include "hourglass/backend/gpu/dropout_kernels.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

namespace {

// The integer form of `uniform_from_bits(bits) >= p`, as the CPU: (bits >> 8) >= ceil(p 2^24).
uint32_t keep_threshold(double p) { return uint32_t(std::ceil(p * 16777216.0)); }

}  // namespace

ops::DropoutForward GpuBackend::dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  gpu::check_float("dropout", x);
  HG_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got {}", p);
  ops::DropoutForward out;
  out.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  out.mask = Tensor::empty(x.shape(), DType::U8, x.device());
  // p = 0 gives threshold 0 and scale 1: every element kept and copied exactly (x * 1).
  gpu::launch_dropout(x.data_ptr(), out.y.data_ptr(), static_cast<uint8_t*>(out.mask.data_ptr()),
                      x.numel(), keep_threshold(p), float(1.0 / (1.0 - p)), seed, offset, x.dtype(),
                      gpu::stream_for(x));
  return out;
}

Tensor GpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask0, double p) {
  gpu::check_float("dropout_backward", dy);
  check_dtype("dropout_backward", "mask", mask0, DType::U8);
  check_same_device("dropout_backward", dy, mask0);
  HG_CHECK(p >= 0.0 && p < 1.0, "dropout_backward: p must be in [0, 1), got {}", p);
  const Tensor mask = mask0.contiguous();
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
  gpu::launch_dropout_backward(dy.data_ptr(), static_cast<const uint8_t*>(mask.data_ptr()),
                               dx.data_ptr(), dy.numel(), float(1.0 / (1.0 - p)), dy.dtype(),
                               gpu::stream_for(dy));
  return dx;
}

}  // namespace hg
