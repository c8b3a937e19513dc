// conv2d forward and backward through oneDNN, in f32 or bf16. Activations stay NHWC at the API and
// weights KRSC; oneDNN picks the weight layout its jit kernels want (format_tag::any) and the
// weights are reordered into it on every call (they change every step; the reorder costs a few
// percent of the convolution). Primitive descriptors, primitives and reorders are cached by shape.
#include <dnnl.hpp>

#include <algorithm>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dnnl_util.h"
#include "hourglass/base/parallel.h"

namespace hg {
namespace {

using cpu::MemoryDesc;
using dnnl::memory;
using Tag = memory::format_tag;

enum class Pass { Forward, BackwardData, BackwardWeights };

// Everything that determines a convolution's primitives.
struct ConvGeometry {
  int64_t n, h, w, c;  // input [N,H,W,C]
  int64_t k, r, s;     // weight [K,R,S,C/groups]
  int64_t p, q;        // output [N,P,Q,K]
  Conv2dParams prm;
  memory::data_type dt;  // of every operand: f32, or bf16 (oneDNN accumulates in f32)

  int64_t groups() const { return prm.groups; }

  std::string key(const char* what, bool has_bias) const {
    return fmt::format("conv2d.{}:{},{},{},{}:{},{},{}:s{},{}:p{},{}:d{},{}:g{}:b{}:t{}", what, n,
                       h, w, c, k, r, s, prm.stride_h, prm.stride_w, prm.pad_h, prm.pad_w,
                       prm.dilation_h, prm.dilation_w, prm.groups, int(has_bias), int(dt));
  }

  // Whether a pass leaves the activation layouts to oneDNN (format_tag::any), with the NHWC
  // tensors reordered at its edges, instead of running on NHWC directly. Measured with
  // oneDNN 2.6 on AVX-512 (ResNet-18/CIFAR shapes, batch 64):
  //  - few input channels (the first layer's 3): the NHWC kernels are several times slower
  //    than the plain-src / blocked-dst ones, and reordering such an input is nearly free;
  //  - backward-data of stride-1 convolutions on tiny maps (4x4): the blocked kernel is about
  //    25% faster and the activations are too small for the reorders to matter.
  // Elsewhere NHWC wins or ties once the reorders of large activations are counted.
  bool blocked_activations(Pass pass) const {
    if (groups() != 1) return false;
    if (c < 8) return true;
    return pass == Pass::BackwardData && prm.stride_h == 1 && prm.stride_w == 1 && p * q <= 16;
  }
  Tag activation_tag(Pass pass) const { return blocked_activations(pass) ? Tag::any : Tag::nhwc; }

  MemoryDesc src_user() const { return cpu::nhwc_desc(n, h, w, c, dt); }
  MemoryDesc dst_user() const { return cpu::nhwc_desc(n, p, q, k, dt); }
  MemoryDesc src_prim(Pass pass) const {
    return MemoryDesc(cpu::dims({n, c, h, w}), dt, activation_tag(pass));
  }
  MemoryDesc dst_prim(Pass pass) const {
    return MemoryDesc(cpu::dims({n, k, p, q}), dt, activation_tag(pass));
  }

  // KRSC. With groups, oneDNN's logical weight dims are {G, K/G, C/G, R, S}; KRSC is then
  // "gohwi" since K = g * K/G + k.
  MemoryDesc weights_user() const { return weights_desc(groups() == 1 ? Tag::ohwi : Tag::gohwi); }
  MemoryDesc weights_any() const { return weights_desc(Tag::any); }
  MemoryDesc weights_desc(Tag tag) const {
    const int64_t g = groups();
    if (g == 1) return MemoryDesc(cpu::dims({k, c, r, s}), dt, tag);
    return MemoryDesc(cpu::dims({g, k / g, c / g, r, s}), dt, tag);
  }
  MemoryDesc bias_desc(bool has_bias) const {
    return has_bias ? MemoryDesc(cpu::dims({k}), dt, Tag::a) : MemoryDesc();
  }

  memory::dims strides() const { return cpu::dims({prm.stride_h, prm.stride_w}); }
  // oneDNN counts dilation from 0 (no gaps); hourglass and PyTorch from 1.
  memory::dims dilates() const { return cpu::dims({prm.dilation_h - 1, prm.dilation_w - 1}); }
  memory::dims pad_l() const { return cpu::dims({prm.pad_h, prm.pad_w}); }
  // oneDNN requires P == (H + pad_l + pad_r - extent) / stride + 1 with floor division, the
  // same formula as conv_out_size, so symmetric padding is always consistent.
  memory::dims pad_r() const { return pad_l(); }
};

// Checks that every operand is f32, or every one bf16.
ConvGeometry geometry(const char* op, const Tensor& x, const Tensor& w, const Tensor& other,
                      const Conv2dParams& prm) {
  ConvGeometry g;
  g.dt = cpu::f32_or_bf16(op, "input", x);
  HG_CHECK(w.dtype() == x.dtype(), "{}: weight {} and input {} differ in dtype", op, w.describe(),
           x.describe());
  HG_CHECK(!other.defined() || other.dtype() == x.dtype(), "{}: {} and input {} differ in dtype",
           op, other.describe(), x.describe());
  g.n = x.size(0), g.h = x.size(1), g.w = x.size(2), g.c = x.size(3);
  g.k = w.size(0), g.r = w.size(1), g.s = w.size(2);
  g.p = conv_out_size(g.h, g.r, prm.stride_h, prm.pad_h, prm.dilation_h);
  g.q = conv_out_size(g.w, g.s, prm.stride_w, prm.pad_w, prm.dilation_w);
  g.prm = prm;
  return g;
}

// oneDNN 2.6 lists its brgemm-based NHWC forward kernel first, but on tiny output maps (the
// 4x4 stage of a CIFAR ResNet) its plain jit kernel is much faster (512->512 3x3, batch 64:
// 14 ms against 23 ms in f32 on a 2-core AVX-512 machine; 3.9 ms against 6.6 ms in bf16 on a
// 2-core AVX-512 BF16 one); from 8x8 up brgconv is as fast or faster. Not with AMX, whose
// tiles only the brgemm kernels use.
template <typename PrimitiveDesc>
void prefer_jit_for_small_maps(PrimitiveDesc& pd, const ConvGeometry& g) {
  if (g.p * g.q > 16) return;
  if (g.dt == memory::data_type::bf16 && cpu::has_amx()) return;
  PrimitiveDesc first = pd;
  while (std::string(pd.impl_info_str()).rfind("brgconv", 0) == 0) {
    if (!pd.next_impl()) {
      pd = first;
      return;
    }
  }
  if (std::string(pd.impl_info_str()).rfind("jit", 0) != 0) pd = first;
}

using FwdPd = dnnl::convolution_forward::primitive_desc;
using BwdDataPd = dnnl::convolution_backward_data::primitive_desc;
using BwdWeightsPd = dnnl::convolution_backward_weights::primitive_desc;

const FwdPd& forward_pd(const ConvGeometry& g, bool has_bias) {
  return cpu::PrimitiveCache::instance().get<FwdPd>(g.key("fwd_pd", has_bias), [&] {
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
        g.src_prim(Pass::Forward), g.weights_any(), g.bias_desc(has_bias),
        g.dst_prim(Pass::Forward), g.strides(), g.dilates(), g.pad_l(), g.pad_r());
    FwdPd pd(d, cpu::engine());
    prefer_jit_for_small_maps(pd, g);
    return pd;
  });
}

struct ForwardPrims {
  FwdPd pd;
  dnnl::convolution_forward prim;
};

const ForwardPrims& forward_prims(const ConvGeometry& g, bool has_bias) {
  const FwdPd& pd = forward_pd(g, has_bias);
  return cpu::PrimitiveCache::instance().get<ForwardPrims>(g.key("fwd", has_bias), [&] {
    return ForwardPrims{pd, dnnl::convolution_forward(pd)};
  });
}

struct BackwardDataPrims {
  BwdDataPd pd;
  dnnl::convolution_backward_data prim;
};

const BackwardDataPrims& backward_data_prims(const ConvGeometry& g) {
  const FwdPd& hint = forward_pd(g, false);
  return cpu::PrimitiveCache::instance().get<BackwardDataPrims>(g.key("bwd_data", false), [&] {
    dnnl::convolution_backward_data::desc d(
        dnnl::algorithm::convolution_direct, g.src_prim(Pass::BackwardData), g.weights_any(),
        g.dst_prim(Pass::BackwardData), g.strides(), g.dilates(), g.pad_l(), g.pad_r());
    BwdDataPd pd(d, cpu::engine(), hint);
    return BackwardDataPrims{pd, dnnl::convolution_backward_data(pd)};
  });
}

struct BackwardWeightsPrims {
  BwdWeightsPd pd;
  dnnl::convolution_backward_weights prim;
};

// oneDNN 2.6's backward-weights convolutions corrupt the heap when they run on more OpenMP
// threads than the batch has images (its 1x1 jit kernel, 17 threads on a batch of 16, writes
// past a buffer; seen on a 16-core machine with micro-batches of 8). They are created and run on
// at most one thread per image: `BatchThreads` lowers the calling thread's OpenMP thread count
// for its lifetime, and the count is part of the primitive's key (oneDNN sizes a primitive's
// scratch space for the thread count it was created with).
class BatchThreads {
 public:
  explicit BatchThreads(int64_t n)
      : saved_(num_threads()), threads_(int(std::clamp<int64_t>(n, 1, saved_))) {
    if (threads_ != saved_) set_num_threads(threads_);
  }
  ~BatchThreads() {
    if (threads_ != saved_) set_num_threads(saved_);
  }
  BatchThreads(const BatchThreads&) = delete;
  BatchThreads& operator=(const BatchThreads&) = delete;
  int threads() const { return threads_; }

 private:
  int saved_, threads_;
};

const BackwardWeightsPrims& backward_weights_prims(const ConvGeometry& g, bool has_bias,
                                                   int threads) {
  const FwdPd& hint = forward_pd(g, has_bias);
  return cpu::PrimitiveCache::instance().get<BackwardWeightsPrims>(
      g.key("bwd_weights", has_bias) + fmt::format(":t{}", threads), [&] {
        dnnl::convolution_backward_weights::desc d(
            dnnl::algorithm::convolution_direct, g.src_prim(Pass::BackwardWeights), g.weights_any(),
            g.bias_desc(has_bias), g.dst_prim(Pass::BackwardWeights), g.strides(), g.dilates(),
            g.pad_l(), g.pad_r());
        BwdWeightsPd pd(d, cpu::engine(), hint);
        return BackwardWeightsPrims{pd, dnnl::convolution_backward_weights(pd)};
      });
}

// Output memory for a primitive whose layout `prim_md` may differ from the tensor's `user_md`;
// finish() copies a temporary back into the tensor.
class OutputMemory {
 public:
  OutputMemory(const Tensor& target, const MemoryDesc& user_md, const MemoryDesc& prim_md)
      : user_(cpu::wrap(target, user_md)),
        mem_(cpu::memory_for(prim_md, target, prim_md == user_md, temp_)) {}
  const memory& mem() const { return mem_; }
  void finish() const {
    if (temp_.defined()) cpu::reorder(mem_, user_);
  }

 private:
  Tensor temp_;
  memory user_;
  memory mem_;
};

}  // namespace

Tensor CpuBackend::conv2d(const Tensor& x, const Tensor& w, const Tensor& bias,
                          const Conv2dParams& p) {
  const ConvGeometry g = geometry("conv2d", x, w, bias, p);
  const ForwardPrims& fwd = forward_prims(g, bias.defined());

  Tensor y = Tensor::empty({g.n, g.p, g.q, g.k}, x.dtype());
  Tensor src_temp, weights_temp;
  const memory src = cpu::in_layout(cpu::wrap(x, g.src_user()), fwd.pd.src_desc(), src_temp);
  const memory weights =
      cpu::in_layout(cpu::wrap(w, g.weights_user()), fwd.pd.weights_desc(), weights_temp);
  const OutputMemory dst(y, g.dst_user(), fwd.pd.dst_desc());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst.mem()}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, cpu::wrap(bias, g.bias_desc(true)));
  cpu::execute(fwd.prim, args);
  dst.finish();
  return y;
}

ops::Conv2dGrads CpuBackend::conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                             bool has_bias, const Conv2dParams& p,
                                             InputGrad input_grad) {
  const ConvGeometry g = geometry("conv2d_backward", x, w, dy, p);
  ops::Conv2dGrads grads;
  const memory dy_user = cpu::wrap(dy, g.dst_user());

  if (input_grad == InputGrad::Compute) {
    const BackwardDataPrims& bwd = backward_data_prims(g);
    grads.dx = Tensor::empty(x.shape(), x.dtype());
    Tensor dy_temp, weights_temp;
    const memory diff_dst = cpu::in_layout(dy_user, bwd.pd.diff_dst_desc(), dy_temp);
    const memory weights =
        cpu::in_layout(cpu::wrap(w, g.weights_user()), bwd.pd.weights_desc(), weights_temp);
    const OutputMemory diff_src(grads.dx, g.src_user(), bwd.pd.diff_src_desc());
    cpu::execute(bwd.prim, {{DNNL_ARG_DIFF_DST, diff_dst},
                            {DNNL_ARG_WEIGHTS, weights},
                            {DNNL_ARG_DIFF_SRC, diff_src.mem()}});
    diff_src.finish();
  }

  const BatchThreads threads(g.n);
  const BackwardWeightsPrims& bwd = backward_weights_prims(g, has_bias, threads.threads());
  grads.dw = Tensor::empty(w.shape(), w.dtype());
  Tensor dy_temp, src_temp;
  const memory diff_dst = cpu::in_layout(dy_user, bwd.pd.diff_dst_desc(), dy_temp);
  const memory src = cpu::in_layout(cpu::wrap(x, g.src_user()), bwd.pd.src_desc(), src_temp);
  const OutputMemory diff_weights(grads.dw, g.weights_user(), bwd.pd.diff_weights_desc());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                       {DNNL_ARG_DIFF_DST, diff_dst},
                                       {DNNL_ARG_DIFF_WEIGHTS, diff_weights.mem()}};
  if (has_bias) {
    grads.dbias = Tensor::empty({g.k}, x.dtype());
    args.emplace(DNNL_ARG_DIFF_BIAS, cpu::wrap(grads.dbias, g.bias_desc(true)));
  }
  cpu::execute(bwd.prim, args);
  diff_weights.finish();
  return grads;
}

}  // namespace hg
