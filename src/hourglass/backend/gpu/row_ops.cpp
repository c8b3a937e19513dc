// Per-row ops of a matrix [N,C] on the GPU (row_ops_kernels.cu): log_softmax and its backward,
// gather_columns and its backward, in f32, bf16 or f16 computed in float. Indices are checked on
// the device, not here: one out of range makes its row NaN (see the kernels' header).
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/backend/gpu/row_ops_kernels.h"

namespace hg {

Tensor GpuBackend::log_softmax(const Tensor& x) {
  gpu::check_float("log_softmax", x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  gpu::launch_log_softmax(x.data_ptr(), x.size(0), x.size(1), x.dtype(), y.data_ptr(),
                          gpu::stream_for(x));
  return y;
}

Tensor GpuBackend::log_softmax_backward(const Tensor& dy, const Tensor& y) {
  gpu::check_float("log_softmax_backward", y);
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  gpu::launch_log_softmax_backward(dy.data_ptr(), y.data_ptr(), y.size(0), y.size(1), y.dtype(),
                                   dx.data_ptr(), gpu::stream_for(y));
  return dx;
}

Tensor GpuBackend::scale_rows(const Tensor& x, const Tensor& scale) {
  gpu::check_float("scale_rows", x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t rows = x.size(0);
  gpu::launch_scale_rows(x.data_ptr(), static_cast<const float*>(scale.data_ptr()), rows,
                         rows > 0 ? x.numel() / rows : 0, x.dtype(), y.data_ptr(),
                         gpu::stream_for(x));
  return y;
}

Tensor GpuBackend::gather_columns(const Tensor& x, const Tensor& index) {
  gpu::check_float("gather_columns", x);
  Tensor out = Tensor::empty({x.size(0)}, x.dtype(), x.device());
  gpu::launch_gather_columns(x.data_ptr(), static_cast<const int64_t*>(index.data_ptr()), x.size(0),
                             x.size(1), x.dtype(), out.data_ptr(), gpu::stream_for(x));
  return out;
}

Tensor GpuBackend::gather_columns_backward(const Tensor& dy, const Tensor& index, int64_t columns) {
  gpu::check_float("gather_columns_backward", dy);
  Tensor dx = Tensor::empty({dy.size(0), columns}, dy.dtype(), dy.device());
  gpu::launch_gather_columns_backward(dy.data_ptr(), static_cast<const int64_t*>(index.data_ptr()),
                                      dy.size(0), columns, dy.dtype(), dx.data_ptr(),
                                      gpu::stream_for(dy));
  return dx;
}

}  // namespace hg
