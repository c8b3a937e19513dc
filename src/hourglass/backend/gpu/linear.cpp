// Linear layer on the GPU: the three matrix products through the blas wrapper (cuBLASLt /
// hipBLASLt), the forward bias fused into the product's epilogue, the bias gradient by the
// deterministic column-sum kernel (bias_kernels.cu).
//
// blas::matmul is column-major; every tensor here is row-major, and a row-major [r x c] matrix
// is the column-major [c x r] matrix with leading dimension c. So each row-major product
// C = A * B is issued as C^T = B^T * A^T on the same memory, nothing transposed in memory:
//   forward   y [N,out] = x [N,in] w^T ->  y^T [out x N]   = w_cm^T [out x in] * x_cm [in x N]
//             (w_cm = w read column-major: [in x out], ld in; x_cm: [in x N], ld in)
//   backward  dx [N,in] = dy [N,out] w ->  dx^T [in x N]   = w_cm [in x out] * dy_cm [out x N]
//             dw [out,in] = dy^T x     ->  dw^T [in x out] = x_cm [in x N] * dy_cm^T [N x out]
//             dbias [out] = column sums of dy [N,out]
#include "hourglass/backend/gpu/bias_kernels.h"
#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

namespace {

using gpu::blas::Transpose;

void check_operand(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  HG_CHECK(t.dtype() == x.dtype(), "gpu {}: {} {} must have the input's dtype {} (cast it first)",
           op, what, t.describe(), dtype_name(x.dtype()));
}

// dbias [cols] = column sums of the contiguous [rows, cols] tensor g.
Tensor bias_grad(const Tensor& g, int64_t rows, int64_t cols, gpuStream_t stream) {
  Tensor dbias = Tensor::empty({cols}, g.dtype(), g.device());
  if (cols == 0) return dbias;
  Tensor partials = Tensor::empty({gpu::bias_grad_partials(rows, cols)}, DType::F32, g.device());
  gpu::launch_bias_grad(rows > 0 ? g.data_ptr() : nullptr, rows, cols, g.dtype(),
                        static_cast<float*>(partials.data_ptr()), dbias.data_ptr(), stream);
  return dbias;
}

}  // namespace

Tensor GpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  gpu::check_float("linear", x);
  check_operand("linear", "weight", w, x);
  if (bias.defined()) check_operand("linear", "bias", bias, x);
  const gpuStream_t stream = gpu::stream_for(x);
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  Tensor y = Tensor::empty({n, out}, x.dtype(), x.device());
  if (n == 0 || out == 0) return y;
  if (in == 0) {  // empty sums: y is the bias broadcast over the rows (or zero)
    y.zero_();
    if (bias.defined())
      gpu::launch_add_bias(y.data_ptr(), bias.data_ptr(), n, out, y.dtype(), stream);
    return y;
  }
  gpu::blas::matmul(gpu::math_mode_for(x.dtype()), /*m=*/out, /*n=*/n, /*k=*/in, w, Transpose::Yes,
                    /*lda=*/in, x, Transpose::No, /*ldb=*/in, bias, y,
                    /*ldd=*/out);
  return y;
}

ops::LinearGrads GpuBackend::linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                             bool has_bias, InputGrad input_grad) {
  gpu::check_float("linear_backward", x);
  check_operand("linear_backward", "grad output", dy, x);
  check_operand("linear_backward", "weight", w, x);
  const gpuStream_t stream = gpu::stream_for(x);
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  const gpu::MathMode math = gpu::math_mode_for(x.dtype());
  const bool empty = n == 0 || in == 0 || out == 0;
  ops::LinearGrads g;
  if (input_grad == InputGrad::Compute) {
    g.dx = Tensor::empty({n, in}, x.dtype(), x.device());
    if (empty)
      g.dx.zero_();
    else
      gpu::blas::matmul(math, /*m=*/in, /*n=*/n, /*k=*/out, w, Transpose::No, /*lda=*/in, dy,
                        Transpose::No, /*ldb=*/out, Tensor(), g.dx, /*ldd=*/in);
  }
  g.dw = Tensor::empty({out, in}, x.dtype(), x.device());
  if (empty)
    g.dw.zero_();
  else
    gpu::blas::matmul(math, /*m=*/in, /*n=*/out, /*k=*/n, x, Transpose::No, /*lda=*/in, dy,
                      Transpose::Yes, /*ldb=*/out, Tensor(), g.dw, /*ldd=*/in);
  if (has_bias) g.dbias = bias_grad(dy, n, out, stream);
  return g;
}

}  // namespace hg
