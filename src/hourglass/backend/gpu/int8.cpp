// INT8 inference on the GPU: the host side of int8_kernels.cu (outputs from the caching
// allocator, pointers and sizes to the launchers). Same semantics as the CPU's
// (backend/cpu/int8.cpp).
#include "hourglass/backend/gpu/gpu_backend.h"
#include "hourglass/backend/gpu/host_util.h"
#include "hourglass/backend/gpu/int8_kernels.h"

namespace hg {

namespace {

const void* ptr(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
const float* f32(const Tensor& t) { return static_cast<const float*>(t.data_ptr()); }
bool is_unsigned(const Tensor& t) { return t.defined() && t.dtype() == DType::U8; }

}  // namespace

Tensor GpuBackend::quantize_int8(const Tensor& x, double inv_scale, DType dtype) {
  gpu::check_float("quantize_int8", x);
  Tensor q = Tensor::empty(x.shape(), dtype, x.device());
  gpu::launch_quantize_int8(ptr(x), x.dtype(), x.numel(), float(inv_scale), q.data_ptr(),
                            dtype == DType::U8, gpu::stream_for(x));
  return q;
}

Tensor GpuBackend::dequantize_int8(const Tensor& q, double scale) {
  Tensor x = Tensor::empty(q.shape(), DType::F32, q.device());
  gpu::launch_dequantize_int8(ptr(q), is_unsigned(q), q.numel(), float(scale),
                              static_cast<float*>(x.data_ptr()), gpu::stream_for(q));
  return x;
}

Tensor GpuBackend::max_pool2d_int8(const Tensor& x, const Pool2dParams& p) {
  gpu::Int8PoolShape g{};
  g.n = x.size(0), g.h = x.size(1), g.w = x.size(2), g.c = x.size(3);
  g.kernel_h = p.kernel_h, g.kernel_w = p.kernel_w, g.stride_h = p.stride_h;
  g.stride_w = p.stride_w, g.pad_h = p.pad_h, g.pad_w = p.pad_w;
  g.p = conv_out_size(g.h, g.kernel_h, g.stride_h, g.pad_h);
  g.q = conv_out_size(g.w, g.kernel_w, g.stride_w, g.pad_w);
  Tensor y = Tensor::empty({g.n, g.p, g.q, g.c}, x.dtype(), x.device());
  gpu::launch_max_pool2d_int8(g, ptr(x), is_unsigned(x), y.data_ptr(), gpu::stream_for(x));
  return y;
}

Tensor GpuBackend::conv2d_int8(const Tensor& x, const Tensor& w, const Tensor& multiplier,
                               const Tensor& bias, const Tensor& residual,
                               const Int8ConvParams& p) {
  gpu::Int8ConvShape g{};
  g.n = x.size(0), g.h = x.size(1), g.w = x.size(2), g.c = x.size(3);
  g.k = w.size(0), g.r = w.size(1), g.s = w.size(2);
  g.stride_h = p.conv.stride_h, g.stride_w = p.conv.stride_w;
  g.pad_h = p.conv.pad_h, g.pad_w = p.conv.pad_w;
  g.p = conv_out_size(g.h, g.r, g.stride_h, g.pad_h);
  g.q = conv_out_size(g.w, g.s, g.stride_w, g.pad_w);
  const DType out = p.f32_output ? DType::F32 : p.relu ? DType::U8 : DType::I8;
  Tensor y = Tensor::empty({g.n, g.p, g.q, g.k}, out, x.device());
  const gpu::Int8ConvEpilogue e{f32(multiplier),
                                f32(bias),
                                ptr(residual),
                                is_unsigned(residual),
                                float(p.residual_multiplier),
                                p.relu,
                                p.f32_output,
                                y.data_ptr()};
  gpu::launch_conv2d_int8(g, ptr(x), is_unsigned(x), static_cast<const int8_t*>(w.data_ptr()), e,
                          gpu::stream_for(x));
  return y;
}

}  // namespace hg
