// What the host side of every GPU op shares (compiled by the C++ compiler, never by nvcc):
// dtype checks, the stream of a tensor's device, output allocation, pooling geometry.
#pragma once

#include "hourglass/backend/gpu/pooling_kernels.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/ops/params.h"
#include "hourglass/tensor/tensor.h"

namespace hg::gpu {

// Throws InvalidInput naming the op and the tensor unless t is f32, bf16 or f16.
inline void check_float(const char* op, const Tensor& t) {
  HG_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16,
           "gpu {}: supports f32, bf16 and f16, got {} (f64 runs on the cpu only)", op,
           t.describe());
}

// Makes t's GPU current for the calling thread and returns the stream its ops go to.
inline gpuStream_t stream_for(const Tensor& t) {
  set_device(t.device().index);
  return stream(t.device().index);
}

// The pooling kernels' geometry of pooling x ([N,H,W,C]) with p.
inline PoolGeometry pool_geometry(const Tensor& x, const Pool2dParams& p) {
  PoolGeometry g{};
  g.n = x.size(0), g.h = x.size(1), g.w = x.size(2), g.c = x.size(3);
  g.p = conv_out_size(g.h, p.kernel_h, p.stride_h, p.pad_h);
  g.q = conv_out_size(g.w, p.kernel_w, p.stride_w, p.pad_w);
  g.kernel_h = p.kernel_h, g.kernel_w = p.kernel_w;
  g.stride_h = p.stride_h, g.stride_w = p.stride_w;
  g.pad_h = p.pad_h, g.pad_w = p.pad_w;
  return g;
}

}  // namespace hg::gpu
