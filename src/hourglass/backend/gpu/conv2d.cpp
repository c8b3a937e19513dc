// conv2d forward and backward on the GPU: the convolutions through the dnn wrapper (cuDNN /
// MIOpen, NHWC activations and KRSC weights as they are, algorithms benchmarked once per shape
// and cached), the bias by the kernels of bias_kernels.cu: an in-place add over the output seen
// as [N*P*Q, K] and a deterministic column sum of dy for its gradient. (ResNets have no
// convolution bias, so its extra pass over the output is off the hot path.)
#include "hourglass/backend/gpu/bias_kernels.h"
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"

namespace hg {

namespace {

void check_operand(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  HG_CHECK(t.dtype() == x.dtype(), "gpu {}: {} {} must have the input's dtype {} (cast it first)",
           op, what, t.describe(), dtype_name(x.dtype()));
}

}  // namespace

Tensor GpuBackend::conv2d(const Tensor& x, const Tensor& w, const Tensor& bias,
                          const Conv2dParams& p) {
  gpu::check_float("conv2d", x);
  check_operand("conv2d", "weight", w, x);
  if (bias.defined()) check_operand("conv2d", "bias", bias, x);
  const gpuStream_t stream = gpu::stream_for(x);
  const gpu::dnn::ConvGeometry g = gpu::dnn::ConvGeometry::of(x, w, p);
  Tensor y = Tensor::empty({g.n, g.p, g.q, g.k}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  if (w.numel() == 0)  // no input channels: empty sums
    y.zero_();
  else
    gpu::dnn::conv_forward(g, gpu::math_mode_for(x.dtype()), x, w, y);
  if (bias.defined())
    gpu::launch_add_bias(y.data_ptr(), bias.data_ptr(), g.n * g.p * g.q, g.k, y.dtype(), stream);
  return y;
}

ops::Conv2dGrads GpuBackend::conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                             bool has_bias, const Conv2dParams& p,
                                             InputGrad input_grad) {
  gpu::check_float("conv2d_backward", x);
  check_operand("conv2d_backward", "grad output", dy, x);
  check_operand("conv2d_backward", "weight", w, x);
  const gpuStream_t stream = gpu::stream_for(x);
  const gpu::dnn::ConvGeometry g = gpu::dnn::ConvGeometry::of(x, w, p);
  const gpu::MathMode math = gpu::math_mode_for(x.dtype());
  // dy has no element when N or K is 0; w none when K or C is 0. Sums over nothing are zero.
  const bool no_terms = dy.numel() == 0 || w.numel() == 0 || x.numel() == 0;
  ops::Conv2dGrads grads;
  if (input_grad == InputGrad::Compute) {
    grads.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    if (no_terms)
      grads.dx.zero_();
    else
      gpu::dnn::conv_backward_data(g, math, dy, w, grads.dx);
  }
  grads.dw = Tensor::empty(w.shape(), w.dtype(), w.device());
  if (no_terms)
    grads.dw.zero_();
  else
    gpu::dnn::conv_backward_filter(g, math, dy, x, grads.dw);
  if (has_bias) {
    const int64_t rows = g.n * g.p * g.q;
    grads.dbias = Tensor::empty({g.k}, dy.dtype(), dy.device());
    if (g.k > 0) {
      Tensor partials =
          Tensor::empty({gpu::bias_grad_partials(rows, g.k)}, DType::F32, dy.device());
      gpu::launch_bias_grad(rows > 0 ? dy.data_ptr() : nullptr, rows, g.k, dy.dtype(),
                            static_cast<float*>(partials.data_ptr()), grads.dbias.data_ptr(),
                            stream);
    }
  }
  return grads;
}

}  // namespace hg
