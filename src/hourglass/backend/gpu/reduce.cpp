// Full reductions on the GPU (f32, bf16, f16 input) to a scalar f32 tensor on the device,
// deterministic (reduce_kernels.cu). The scalar is never read back here.
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/backend/gpu/reduce_kernels.h"

namespace hg {

namespace {

Tensor reduce_to_scalar(const char* op, gpu::ReduceOp kind, const Tensor& x) {
  gpu::check_float(op, x);
  const gpuStream_t stream = gpu::stream_for(x);
  Tensor out = Tensor::empty({}, DType::F32, x.device());
  // Scratch for the block sums; freed when this returns, which the stream-ordered allocator
  // allows because every later use of the block is issued to the same stream.
  Tensor partials;
  const int64_t count = gpu::reduce_partials(x.numel());
  if (count > 0) partials = Tensor::empty({count}, DType::F32, x.device());
  gpu::launch_reduce(kind, x.numel() > 0 ? x.data_ptr() : nullptr, x.numel(), x.dtype(),
                     count > 0 ? static_cast<float*>(partials.data_ptr()) : nullptr,
                     static_cast<float*>(out.data_ptr()), stream);
  return out;
}

}  // namespace

Tensor GpuBackend::sum(const Tensor& x) { return reduce_to_scalar("sum", gpu::ReduceOp::Sum, x); }

Tensor GpuBackend::sum_squares(const Tensor& x) {
  return reduce_to_scalar("sum_squares", gpu::ReduceOp::SumSquares, x);
}

}  // namespace hg
