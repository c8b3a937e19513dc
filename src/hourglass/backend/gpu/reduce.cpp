// Full reductions on the GPU (f32, bf16, f16 input) to a scalar f32 tensor on the device,
// deterministic (reduce_kernels.cu): the methods of the table HG_REDUCTION_OPS
// (backend/reduction_functors.h). The scalar is never read back here.
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

#define HG_GPU_REDUCTION(name, Functor)                     \
  Tensor GpuBackend::name(const Tensor& x) {                \
    return reduce_to_scalar(#name, gpu::ReduceOp::name, x); \
  }
HG_REDUCTION_OPS(HG_GPU_REDUCTION)
#undef HG_GPU_REDUCTION

}  // namespace hg
