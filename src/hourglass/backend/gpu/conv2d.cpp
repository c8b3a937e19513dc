// conv2d forward and backward on the GPU: the convolutions through the dnn wrapper (cuDNN /
// MIOpen, NHWC activations and KRSC weights as they are, algorithms benchmarked once per shape
// and cached), the bias by the kernels of bias_kernels.cu: an in-place add over the output seen
// as [N*P*Q, K] and a deterministic column sum of dy for its gradient. (ResNets have no
// convolution bias, so its extra pass over the output is off the hot path.)
//
// Stems: a stride-2 convolution over at most 4 input channels (ResNet-50's 7x7 on RGB) runs as
// a stride-1 convolution over 2x2 blocks of pixels (space_to_depth_kernels.h): the input
// becomes [n, ~h/2, ~w/2, 16] (4 pixels x 4 channels, the 4th and any missing zero), the
// weights [k, (r+1)/2, (s+1)/2, 16], and every output is the sum of the same products as
// before, now over 16 channels, which the libraries' tensor-core engines take (bf16 and f16
// want channels in multiples of 8; cuDNN ran the 3-channel 7x7 at 36 TFLOP/s, padding the input
// first, bench/README.md). The weight gradient is computed on the blocks and read back; the
// input gradient, which a stem does not need, takes the plain convolution.
// The run's engine.conv_space_to_depth decides it (ops::conv_space_to_depth()).
//
// The forward in bf16 and f16, where the output's width is even, goes one step further: two
// horizontally adjacent output pixels become one pixel of 2k channels (the output's memory
// unchanged, [n, p, q/2, 2k]), over 2x4 pixel blocks of 32 channels with a window of
// (r+1)/2 x space_to_depth_pair_width(s) blocks; output channel e k + o has pixel 2X + e's
// weights, shifted 2e columns. More products (the zeros of the shifted windows), but a
// convolution the tensor-core engines run at a better rate: ResNet-50's stem (224 px, batch
// 256, bf16) through PyTorch's cuDNN took 697 us over 2x2 blocks and 281 us as pairs (H200,
// bench/README.md). Its weight gradient as pairs took longer (632 us against 456), so the
// backward keeps the 2x2 blocks. The run's engine.conv_stem_pixel_pairs decides it
// (ops::conv_stem_pixel_pairs()).
#include <utility>
#include <vector>

#include "hourglass/backend/gpu/bias_kernels.h"
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/backend/gpu/space_to_depth_kernels.h"
#include "hourglass/ops/math_settings.h"

namespace hg {

namespace {

// The convolution that `g` becomes over 2x2 pixel blocks, when the rewrite applies.
bool space_to_depth_applies(const gpu::dnn::ConvGeometry& g) {
  const Conv2dParams& p = g.params;
  return p.groups == 1 && p.stride_h == 2 && p.stride_w == 2 && p.dilation_h == 1 &&
         p.dilation_w == 1 && g.r >= 2 && g.s >= 2 && g.c <= gpu::kSpaceToDepthChannels &&
         ops::conv_space_to_depth();
}

// Whether the forward of `g` (space_to_depth_applies) runs over pairs of output pixels.
bool pixel_pairs_apply(const gpu::dnn::ConvGeometry& g, DType dtype) {
  return g.q % 2 == 0 && (dtype == DType::BF16 || dtype == DType::F16) &&
         ops::conv_stem_pixel_pairs();
}

gpu::dnn::ConvGeometry pixel_pairs_geometry(const gpu::dnn::ConvGeometry& g) {
  gpu::dnn::ConvGeometry b;
  b.n = g.n;
  b.r = (g.r + 1) / 2, b.s = gpu::space_to_depth_pair_width(g.s);
  b.p = g.p, b.q = g.q / 2;
  b.h = b.p + b.r - 1, b.w = b.q + b.s - 1;  // stride 1, no padding
  b.c = 8 * gpu::kSpaceToDepthChannels;
  b.k = 2 * g.k;
  b.params = Conv2dParams{};
  return b;
}

// The forward over pairs of output pixels, into y [n, p, q, k].
void pixel_pairs_forward(const gpu::dnn::ConvGeometry& g, const Tensor& x, const Tensor& w,
                         Tensor& y, gpuStream_t stream) {
  const gpu::dnn::ConvGeometry b = pixel_pairs_geometry(g);
  Tensor wb = Tensor::empty({b.k, b.r, b.s, b.c}, w.dtype(), w.device());
  gpu::launch_space_to_depth_pair_weight(w.data_ptr(), wb.data_ptr(), g.k, g.r, g.s, g.c, w.dtype(),
                                         stream);
  Tensor blocks = Tensor::empty({b.n, b.h, b.w, b.c}, x.dtype(), x.device());
  gpu::launch_space_to_depth_pair_input(x.data_ptr(), blocks.data_ptr(), g.n, g.h, g.w, g.c, b.h,
                                        b.w, g.params.pad_h, g.params.pad_w, x.dtype(), stream);
  Tensor pairs = y.view({b.n, b.p, b.q, b.k});
  gpu::dnn::conv_forward(b, gpu::math_mode_for(x.dtype()), blocks, wb, pairs);
}

gpu::dnn::ConvGeometry space_to_depth_geometry(const gpu::dnn::ConvGeometry& g) {
  gpu::dnn::ConvGeometry b;
  b.n = g.n;
  b.r = (g.r + 1) / 2, b.s = (g.s + 1) / 2;
  b.p = g.p, b.q = g.q;
  b.h = g.p + b.r - 1, b.w = g.q + b.s - 1;  // stride 1, no padding: p = h - r + 1
  b.c = 4 * gpu::kSpaceToDepthChannels;
  b.k = g.k;
  b.params = Conv2dParams{};
  return b;
}

// The input as 2x2 pixel blocks, shaped for `b` (space_to_depth_geometry(g)).
Tensor input_blocks(const gpu::dnn::ConvGeometry& g, const gpu::dnn::ConvGeometry& b,
                    const Tensor& x, gpuStream_t stream) {
  Tensor blocks = Tensor::empty({b.n, b.h, b.w, b.c}, x.dtype(), x.device());
  gpu::launch_space_to_depth_input(x.data_ptr(), blocks.data_ptr(), g.n, g.h, g.w, g.c, b.h, b.w,
                                   g.params.pad_h, g.params.pad_w, x.dtype(), stream);
  return blocks;
}

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
  if (w.numel() == 0) {  // no input channels: empty sums
    y.zero_();
  } else if (space_to_depth_applies(g) && pixel_pairs_apply(g, x.dtype())) {
    pixel_pairs_forward(g, x, w, y, stream);
  } else if (space_to_depth_applies(g)) {
    const gpu::dnn::ConvGeometry b = space_to_depth_geometry(g);
    Tensor wb = Tensor::empty({b.k, b.r, b.s, b.c}, w.dtype(), w.device());
    gpu::launch_space_to_depth_weight(w.data_ptr(), wb.data_ptr(), g.k, g.r, g.s, g.c, w.dtype(),
                                      stream);
    gpu::dnn::conv_forward(b, gpu::math_mode_for(x.dtype()), input_blocks(g, b, x, stream), wb, y);
  } else {
    gpu::dnn::conv_forward(g, gpu::math_mode_for(x.dtype()), x, w, y);
  }
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
  if (no_terms) {
    grads.dw = Tensor::zeros(w.shape(), w.dtype(), w.device());
  } else if (space_to_depth_applies(g)) {
    grads.dw = Tensor::empty(w.shape(), w.dtype(), w.device());
    const gpu::dnn::ConvGeometry b = space_to_depth_geometry(g);
    Tensor dwb = Tensor::empty({b.k, b.r, b.s, b.c}, w.dtype(), w.device());
    gpu::dnn::conv_backward_filter(b, math, dy, input_blocks(g, b, x, stream), dwb);
    gpu::launch_space_to_depth_weight_grad(dwb.data_ptr(), grads.dw.data_ptr(), g.k, g.r, g.s, g.c,
                                           w.dtype(), stream);
  } else {
    grads.dw = Tensor::empty(w.shape(), w.dtype(), w.device());
    gpu::dnn::conv_backward_filter(g, math, dy, x, grads.dw);
  }
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
