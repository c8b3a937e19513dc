// INT8 inference on the CPU: quantising to s8, dequantising, and the s8 convolution through
// oneDNN's int8 kernels (VNNI where the CPU has it): int32 sums, then the epilogue of
// Int8ConvParams as oneDNN 2.6's attributes: per-channel output scales (the multiplier, applied
// to sum + bias, the bias in the accumulator's units), a sum post-op for the residual (the
// output buffer holds the residual beforehand) and a ReLU post-op. Activations stay NHWC; the
// weights are reordered into the layout the kernel wants on every call (with its compensation for
// signed inputs), which for an inference batch is small beside the convolution.
#include <dnnl.hpp>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/backend/cpu/dnnl_util.h"
#include "hourglass/base/parallel.h"

namespace hg {

using cpu::compute_t;
using cpu::dispatch_storage;
using cpu::widen;

namespace {

constexpr int64_t kInt8Grain = int64_t(1) << 15;

template <typename C>
int8_t saturate_round_s8(C v) {
  // NaN fails both comparisons and becomes 0.
  const C r = std::nearbyint(v);
  return r >= C(127) ? int8_t(127) : r <= C(-128) ? int8_t(-128) : r == r ? int8_t(r) : int8_t(0);
}

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

struct Int8ConvPrimitives {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  std::vector<float> scales;  // the output scales it was made with
};

}  // namespace

Tensor CpuBackend::quantize_int8(const Tensor& x, double inv_scale) {
  Tensor q = Tensor::empty(x.shape(), DType::I8, x.device());
  int8_t* dst = q.data<int8_t>();
  dispatch_storage("quantize_int8", x, [&]<typename T>() {
    using C = compute_t<T>;
    const T* src = x.data<T>();
    const C s = C(inv_scale);
    parallel_for_inline(x.numel(), kInt8Grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = saturate_round_s8<C>(widen(src[i]) * s);
    });
  });
  return q;
}

Tensor CpuBackend::dequantize_int8(const Tensor& q, double scale) {
  Tensor x = Tensor::empty(q.shape(), DType::F32, q.device());
  const int8_t* src = q.data<int8_t>();
  float* dst = x.data<float>();
  const float s = float(scale);
  parallel_for_inline(q.numel(), kInt8Grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = float(src[i]) * s;
  });
  return x;
}

Tensor CpuBackend::conv2d_int8(const Tensor& x, const Tensor& w, const Tensor& multiplier,
                               const Tensor& bias, const Tensor& residual,
                               const Int8ConvParams& p) {
  const int64_t n = x.size(0), h = x.size(1), wd = x.size(2), c = x.size(3);
  const int64_t k = w.size(0), r = w.size(1), s = w.size(2);
  const Conv2dParams& cp = p.conv;
  const int64_t oh = conv_out_size(h, r, cp.stride_h, cp.pad_h);
  const int64_t ow = conv_out_size(wd, s, cp.stride_w, cp.pad_w);
  const Dt out_dt = p.f32_output ? Dt::f32 : Dt::s8;
  Tensor y = Tensor::empty({n, oh, ow, k}, p.f32_output ? DType::F32 : DType::I8, x.device());
  if (y.numel() == 0) return y;
  // The sum post-op adds what the output buffer holds: the residual.
  if (residual.defined()) std::memcpy(y.data_ptr(), residual.data_ptr(), size_t(y.nbytes()));

  const memory::desc src_md = cpu::nhwc_desc(n, h, wd, c, Dt::s8);
  const memory::desc dst_md = cpu::nhwc_desc(n, oh, ow, k, out_dt);
  const memory::desc wei_user(cpu::dims({k, c, r, s}), Dt::s8, Tag::ohwi);
  const memory::desc bias_md(cpu::dims({k}), Dt::f32, Tag::a);
  const float* m = multiplier.data<float>();
  const std::vector<float> scales(m, m + k);
  // oneDNN 2.6's int8 kernels take output scales fixed when the primitive is made, so a
  // primitive is made per layer: the key holds a hash of the scales, and a hit with other scales
  // (a collision) makes one of its own.
  uint64_t hash = 1469598103934665603ull;
  for (float v : scales) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    hash = (hash ^ bits) * 1099511628211ull;
  }
  const std::string key =
      fmt::format("conv2d_int8:{},{},{},{}:{},{},{}:s{},{}:p{},{}:o{}:r{}:{}:m{}:h{:x}", n, h, wd,
                  c, k, r, s, cp.stride_h, cp.stride_w, cp.pad_h, cp.pad_w, int(p.f32_output),
                  int(residual.defined()), int(p.relu), p.residual_multiplier, hash);
  const auto make = [&] {
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
        memory::desc(cpu::dims({k, c, r, s}), Dt::s8, Tag::any), bias_md, dst_md,
        cpu::dims({cp.stride_h, cp.stride_w}), cpu::dims({cp.pad_h, cp.pad_w}),
        cpu::dims({cp.pad_h, cp.pad_w}));
    dnnl::primitive_attr attr;
    // One scale per output channel: dimension 1 of {N, K, P, Q}.
    attr.set_output_scales(1 << 1, scales);
    dnnl::post_ops ops;
    if (residual.defined()) ops.append_sum(float(p.residual_multiplier));
    if (p.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
    dnnl::convolution_forward::primitive_desc pd(d, attr, cpu::engine());
    return Int8ConvPrimitives{pd, dnnl::convolution_forward(pd), scales};
  };
  const Int8ConvPrimitives& cached =
      cpu::PrimitiveCache::instance().get<Int8ConvPrimitives>(key, make);
  std::optional<Int8ConvPrimitives> own;
  if (cached.scales != scales) own.emplace(make());
  const Int8ConvPrimitives& prims = own ? *own : cached;
  Tensor weight_buffer;
  const memory weights =
      cpu::in_layout(cpu::wrap(w, wei_user), prims.pd.weights_desc(), weight_buffer);
  cpu::execute(prims.prim, {{DNNL_ARG_SRC, cpu::wrap(x, src_md)},
                            {DNNL_ARG_WEIGHTS, weights},
                            {DNNL_ARG_BIAS, cpu::wrap(bias, bias_md)},
                            {DNNL_ARG_DST, cpu::wrap(y, dst_md)}});
  return y;
}

}  // namespace hg
