// Elementwise ops on the GPU (f32, bf16, f16; computed in float). The op bodies (ops/op_list.h)
// have checked shapes, dtypes and devices and made the inputs contiguous; each op is one kernel
// launch on the device's stream (elementwise_kernels.cu) applying a functor of
// backend/elementwise_functors.h, the formulas the CPU kernels apply too.
#include "hourglass/backend/elementwise_functors.h"
#include "hourglass/backend/gpu/elementwise_kernels.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

namespace {

template <typename F>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, F f) {
  gpu::check_float(op, a);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  gpu::launch_binary(f, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(), a.dtype(),
                     gpu::stream_for(a));
  return out;
}

template <typename F>
Tensor unary(const char* op, const Tensor& a, F f) {
  gpu::check_float(op, a);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  gpu::launch_unary(f, a.data_ptr(), out.data_ptr(), a.numel(), a.dtype(), gpu::stream_for(a));
  return out;
}

}  // namespace

// The ops of the functor table (elementwise_functors.h). A scalar is rounded to f32 once, as
// the CPU rounds it to the f32 element type.
#define HG_GPU_UNARY(name, F) \
  Tensor GpuBackend::name(const Tensor& x) { return unary(#name, x, elementwise::F<float>{}); }
#define HG_GPU_SCALAR(name, F)                               \
  Tensor GpuBackend::name(const Tensor& x, double s) {       \
    return unary(#name, x, elementwise::F<float>{float(s)}); \
  }
#define HG_GPU_BINARY(name, F)                                \
  Tensor GpuBackend::name(const Tensor& a, const Tensor& b) { \
    return binary(#name, a, b, elementwise::F<float>{});      \
  }
HG_ELEMENTWISE_OPS(HG_GPU_UNARY, HG_GPU_SCALAR, HG_GPU_BINARY)
#undef HG_GPU_UNARY
#undef HG_GPU_SCALAR
#undef HG_GPU_BINARY

void GpuBackend::add_(Tensor& dst, const Tensor& src, double alpha) {
  gpu::check_float("add_", dst);
  const gpuStream_t stream = gpu::stream_for(dst);
  // alpha == 1 (gradient accumulation) skips the multiply, as the CPU does.
  if (alpha == 1.0)
    gpu::launch_binary(elementwise::Add<float>{}, dst.data_ptr(), src.data_ptr(), dst.data_ptr(),
                       dst.numel(), dst.dtype(), stream);
  else
    gpu::launch_binary(elementwise::AddScaled<float>{float(alpha)}, dst.data_ptr(), src.data_ptr(),
                       dst.data_ptr(), dst.numel(), dst.dtype(), stream);
}

void GpuBackend::accumulate_(const std::vector<Tensor>& dsts, const std::vector<Tensor>& srcs) {
  // f32 destinations go to the multi-tensor kernel, a launch per source dtype and table of
  // gpu::kAccumulateTensors; any other pair is an add_ of its own.
  const gpuStream_t stream = gpu::stream_for(dsts[0]);
  for (const DType source : {DType::F32, DType::BF16, DType::F16}) {
    gpu::AccumulateTable table;
    for (size_t i = 0; i < dsts.size(); ++i) {
      if (dsts[i].dtype() != DType::F32 || srcs[i].dtype() != source || dsts[i].numel() == 0)
        continue;
      table.dst[table.count] = static_cast<float*>(dsts[i].data_ptr());
      table.src[table.count] = srcs[i].data_ptr();
      table.numel[table.count] = dsts[i].numel();
      if (++table.count == gpu::kAccumulateTensors) {
        gpu::launch_accumulate(table, source, stream);
        table.count = 0;
      }
    }
    if (table.count > 0) gpu::launch_accumulate(table, source, stream);
  }
  for (size_t i = 0; i < dsts.size(); ++i) {
    const DType s = srcs[i].dtype();
    if (dsts[i].dtype() == DType::F32 && (s == DType::F32 || s == DType::BF16 || s == DType::F16))
      continue;
    Tensor dst = dsts[i];
    add_(dst, s == dst.dtype() ? srcs[i] : srcs[i].to(dst.dtype()), 1.0);
  }
}

void GpuBackend::mul_scalar_(Tensor& dst, double s) {
  gpu::check_float("mul_scalar_", dst);
  gpu::launch_unary(elementwise::MulScalar<float>{float(s)}, dst.data_ptr(), dst.data_ptr(),
                    dst.numel(), dst.dtype(), gpu::stream_for(dst));
}

}  // namespace hg
