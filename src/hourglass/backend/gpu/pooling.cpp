// Max, average and global average pooling on the GPU over NHWC (f32, bf16, f16; float
// accumulation; outputs in the input's dtype). Max pooling's workspace is an arg-max per output
// element, u8 or i32 (pooling_kernels.h); backward passes gather, so they are deterministic.
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/backend/gpu/pooling_kernels.h"

namespace hg {

namespace {

Shape output_shape(const gpu::PoolGeometry& g) { return {g.n, g.p, g.q, g.c}; }

// The backward's grad output must be the pooled shape, in the input's dtype, on its device.
void check_grad(const char* op, const Tensor& dy, const Tensor& x, const Shape& expected) {
  gpu::check_float(op, dy);
  check_same_device(op, dy, x);
  check_same_dtype(op, dy, x);
  HG_CHECK(dy.shape() == expected, "{}: grad output {} does not match the pooled shape {}", op,
           dy.describe(), shape_str(expected));
}

}  // namespace

ops::MaxPoolForward GpuBackend::max_pool2d(const Tensor& x, const Pool2dParams& p) {
  gpu::check_float("max_pool2d", x);
  const gpu::PoolGeometry g = gpu::pool_geometry(x, p);
  HG_CHECK(g.h * g.w < (int64_t(1) << 31),
           "max_pool2d: input {} has more than 2^31 positions per image", x.describe());
  ops::MaxPoolForward out;
  out.y = Tensor::empty(output_shape(g), x.dtype(), x.device());
  out.workspace = Tensor::empty(output_shape(g), gpu::max_pool_workspace_dtype(g), x.device());
  gpu::launch_max_pool(x.data_ptr(), out.y.data_ptr(), out.workspace.data_ptr(), g, x.dtype(),
                       gpu::stream_for(x));
  return out;
}

Tensor GpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& x, const Tensor& workspace,
                                       const Pool2dParams& p) {
  const char* op = "max_pool2d_backward";
  const gpu::PoolGeometry g = gpu::pool_geometry(x, p);
  check_grad(op, dy, x, output_shape(g));
  HG_CHECK(workspace.defined() && workspace.dtype() == gpu::max_pool_workspace_dtype(g) &&
               workspace.shape() == output_shape(g) && workspace.is_contiguous() &&
               workspace.device() == x.device(),
           "{}: workspace {} is not the one max_pool2d returned for this input and parameters "
           "on the gpu",
           op, workspace.defined() ? workspace.describe() : "undefined");
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  gpu::launch_max_pool_backward(dy.data_ptr(), workspace.data_ptr(), dx.data_ptr(), g, x.dtype(),
                                gpu::stream_for(x));
  return dx;
}

Tensor GpuBackend::avg_pool2d(const Tensor& x, const Pool2dParams& p) {
  gpu::check_float("avg_pool2d", x);
  const gpu::PoolGeometry g = gpu::pool_geometry(x, p);
  Tensor y = Tensor::empty(output_shape(g), x.dtype(), x.device());
  gpu::launch_avg_pool(x.data_ptr(), y.data_ptr(), g, x.dtype(), gpu::stream_for(x));
  return y;
}

Tensor GpuBackend::avg_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2dParams& p) {
  const gpu::PoolGeometry g = gpu::pool_geometry(x, p);
  check_grad("avg_pool2d_backward", dy, x, output_shape(g));
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  gpu::launch_avg_pool_backward(dy.data_ptr(), dx.data_ptr(), g, x.dtype(), gpu::stream_for(x));
  return dx;
}

Tensor GpuBackend::global_avg_pool(const Tensor& x) {
  gpu::check_float("global_avg_pool", x);
  const int64_t n = x.size(0), hw = x.size(1) * x.size(2), c = x.size(3);
  HG_CHECK(n < (int64_t(1) << 31), "global_avg_pool: input {} has 2^31 images or more",
           x.describe());
  Tensor y = Tensor::empty({n, c}, x.dtype(), x.device());
  gpu::launch_global_avg_pool(x.data_ptr(), y.data_ptr(), n, hw, c, x.dtype(), gpu::stream_for(x));
  return y;
}

Tensor GpuBackend::global_avg_pool_backward(const Tensor& dy, const Tensor& x) {
  const int64_t n = x.size(0), hw = x.size(1) * x.size(2), c = x.size(3);
  check_grad("global_avg_pool_backward", dy, x, {n, c});
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  gpu::launch_global_avg_pool_backward(dy.data_ptr(), dx.data_ptr(), n, hw, c, x.dtype(),
                                       gpu::stream_for(x));
  return dx;
}

}  // namespace hg
