// INT8 inference on the CPU: quantising to s8 or u8, dequantising, and the int8 convolution
// through oneDNN's int8 kernels (VNNI where the CPU has it; u8 inputs, a ReLU's outputs, are what
// VNNI multiplies natively): int32 sums, then the epilogue of Int8ConvParams as oneDNN 2.6's
// attributes: per-channel output scales (the multiplier, applied to sum + bias, the bias in the
// accumulator's units), a sum post-op for the residual (the output buffer holds the residual
// beforehand, read as its own type) and a ReLU post-op. Activations stay NHWC; the weights are
// reordered into the layout the kernel wants once per weight tensor (reordered_weights).
#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
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

// round half to even, saturated to Q's range; NaN fails every comparison and becomes 0.
template <typename Q, typename C>
Q saturate_round(C v) {
  constexpr C lo = C(std::numeric_limits<Q>::min()), hi = C(std::numeric_limits<Q>::max());
  const C r = std::nearbyint(v);
  return r >= hi ? Q(hi) : r <= lo ? Q(lo) : r == r ? Q(r) : Q(0);
}

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

struct Int8ConvPrimitives {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  std::vector<float> scales;  // the output scales it was made with
};

// A sample of the weights' bytes (the first and last 256 and 64 spread between): what a
// reordered copy is checked against before it is used again.
uint64_t weights_fingerprint(const Tensor& w) {
  const auto* b = static_cast<const uint8_t*>(w.data_ptr());
  const size_t n = size_t(w.nbytes());
  uint64_t h = 1469598103934665603ull ^ n;
  auto mix = [&](size_t i) { h = (h ^ b[i]) * 1099511628211ull; };
  for (size_t i = 0; i < std::min<size_t>(n, 256); ++i) mix(i), mix(n - 1 - i);
  for (size_t k = 1; k <= 64 && n > 0; ++k) mix(n * k / 65);
  return h;
}

// The weights in the layout the kernel wants. An inference network calls with the same weight
// tensor every time, so the reordered copy is kept per weight storage and layout while that
// storage lives (weak reference), and used again when the weights' fingerprint is unchanged;
// the weights must not change in place between calls (an INT8 network's never do), and a
// different tensor, or a storage freed and allocated again, is reordered afresh.
memory reordered_weights(const Tensor& w, const memory::desc& user, const memory::desc& wanted) {
  struct Entry {
    std::weak_ptr<Storage> source;
    uint64_t fingerprint = 0;
    Tensor buffer;
    memory mem;
  };
  static std::mutex mutex;
  static std::map<std::string, Entry> cache;
  const std::shared_ptr<Storage> storage = w.storage();
  const std::string key =
      fmt::format("{}:{}:{}", static_cast<const void*>(storage.get()),
                  static_cast<const void*>(w.data_ptr()), cpu::desc_key(wanted));
  const uint64_t fingerprint = weights_fingerprint(w);
  std::lock_guard lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end() && it->second.source.lock() == storage &&
      it->second.fingerprint == fingerprint)
    return it->second.mem;
  std::erase_if(cache, [](const auto& e) { return e.second.source.expired(); });
  Entry e;
  e.source = storage;
  e.fingerprint = fingerprint;
  e.mem = cpu::in_layout(cpu::wrap(w, user), wanted, e.buffer);
  // in_layout hands back the user's own memory when no reorder is needed: keep it as is then.
  return (cache[key] = std::move(e)).mem;
}

}  // namespace

Tensor CpuBackend::quantize_int8(const Tensor& x, double inv_scale, DType dtype) {
  Tensor q = Tensor::empty(x.shape(), dtype, x.device());
  dispatch_storage("quantize_int8", x, [&]<typename T>() {
    using C = compute_t<T>;
    const T* src = x.data<T>();
    const C s = C(inv_scale);
    auto loop = [&]<typename Q>(Q* dst) {
      parallel_for_inline(x.numel(), kInt8Grain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dst[i] = saturate_round<Q, C>(widen(src[i]) * s);
      });
    };
    if (dtype == DType::U8)
      loop(q.data<uint8_t>());
    else
      loop(q.data<int8_t>());
  });
  return q;
}

Tensor CpuBackend::dequantize_int8(const Tensor& q, double scale) {
  Tensor x = Tensor::empty(q.shape(), DType::F32, q.device());
  float* dst = x.data<float>();
  const float s = float(scale);
  auto loop = [&]<typename Q>(const Q* src) {
    parallel_for_inline(q.numel(), kInt8Grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) dst[i] = float(src[i]) * s;
    });
  };
  if (q.dtype() == DType::U8)
    loop(q.data<uint8_t>());
  else
    loop(q.data<int8_t>());
  return x;
}

Tensor CpuBackend::max_pool2d_int8(const Tensor& x, const Pool2dParams& p) {
  const int64_t n = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3);
  const int64_t oh = conv_out_size(h, p.kernel_h, p.stride_h, p.pad_h);
  const int64_t ow = conv_out_size(w, p.kernel_w, p.stride_w, p.pad_w);
  Tensor y = Tensor::empty({n, oh, ow, c}, x.dtype(), x.device());
  auto pool = [&]<typename Q>() {
    const Q* in = static_cast<const Q*>(x.data_ptr());
    Q* out = static_cast<Q*>(y.data_ptr());
    // Output rows (image, oy) [begin, end): each window position's channels in turn.
    auto rows = [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / oh, oy = row % oh;
        const int64_t y0 = std::max<int64_t>(0, oy * p.stride_h - p.pad_h);
        const int64_t y1 = std::min(h, oy * p.stride_h - p.pad_h + p.kernel_h);
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t x0 = std::max<int64_t>(0, ox * p.stride_w - p.pad_w);
          const int64_t x1 = std::min(w, ox * p.stride_w - p.pad_w + p.kernel_w);
          Q* o = out + ((b * oh + oy) * ow + ox) * c;
          std::fill(o, o + c, std::numeric_limits<Q>::min());
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) {
              const Q* v = in + ((b * h + iy) * w + ix) * c;
              for (int64_t k = 0; k < c; ++k) o[k] = std::max(o[k], v[k]);
            }
        }
      }
    };
    parallel_for_inline(n * oh, std::max<int64_t>(1, kInt8Grain / std::max<int64_t>(1, ow * c)),
                        rows);
  };
  if (x.dtype() == DType::U8)
    pool.template operator()<uint8_t>();
  else
    pool.template operator()<int8_t>();
  return y;
}

Tensor CpuBackend::conv2d_int8(const Tensor& x, const Tensor& w, const Tensor& multiplier,
                               const Tensor& bias, const Tensor& residual,
                               const Int8ConvParams& p) {
  const int64_t n = x.size(0), h = x.size(1), wd = x.size(2), c = x.size(3);
  const int64_t k = w.size(0), r = w.size(1), s = w.size(2);
  const Conv2dParams& cp = p.conv;
  const int64_t oh = conv_out_size(h, r, cp.stride_h, cp.pad_h);
  const int64_t ow = conv_out_size(wd, s, cp.stride_w, cp.pad_w);
  const DType out = p.f32_output ? DType::F32 : p.relu ? DType::U8 : DType::I8;
  const Dt out_dt = out == DType::F32 ? Dt::f32 : out == DType::U8 ? Dt::u8 : Dt::s8;
  const Dt src_dt = x.dtype() == DType::U8 ? Dt::u8 : Dt::s8;
  // The residual is read from the output buffer as its own type (s8 into a u8 output).
  const Dt residual_dt = residual.defined() && residual.dtype() != out
                             ? (residual.dtype() == DType::U8 ? Dt::u8 : Dt::s8)
                             : Dt::undef;
  Tensor y = Tensor::empty({n, oh, ow, k}, out, x.device());
  if (y.numel() == 0) return y;
  // The sum post-op adds what the output buffer holds: the residual.
  if (residual.defined()) std::memcpy(y.data_ptr(), residual.data_ptr(), size_t(y.nbytes()));

  const memory::desc src_md = cpu::nhwc_desc(n, h, wd, c, src_dt);
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
  const std::string key = fmt::format(
      "conv2d_int8:{},{},{},{}:{},{},{}:s{},{}:p{},{}:t{},{},{}:r{}:{}:m{}:h{:x}", n, h, wd, c, k,
      r, s, cp.stride_h, cp.stride_w, cp.pad_h, cp.pad_w, int(src_dt), int(out_dt),
      int(residual_dt), int(residual.defined()), int(p.relu), p.residual_multiplier, hash);
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
    if (residual.defined()) ops.append_sum(float(p.residual_multiplier), residual_dt);
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
  const memory weights = reordered_weights(w, wei_user, prims.pd.weights_desc());
  cpu::execute(prims.prim, {{DNNL_ARG_SRC, cpu::wrap(x, src_md)},
                            {DNNL_ARG_WEIGHTS, weights},
                            {DNNL_ARG_BIAS, cpu::wrap(bias, bias_md)},
                            {DNNL_ARG_DST, cpu::wrap(y, dst_md)}});
  return y;
}

}  // namespace hg
