// What the host side of every GPU op shares (compiled by the C++ compiler, never by nvcc):
// dtype checks, the stream of a tensor's device, output allocation.
#pragma once

#include "hourglass/device/gpu/runtime.h"
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

}  // namespace hg::gpu
