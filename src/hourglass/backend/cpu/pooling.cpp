// Pooling. Max and average pooling run oneDNN's NHWC jit kernels (primitives cached by shape);
// max pooling's workspace is oneDNN's own arg-max record, kept as raw bytes (u8). Global
// average pooling is a plain loop: it is tiny next to everything around it.
#include <dnnl.hpp>

#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/backend/cpu/dnnl_util.h"
#include "hourglass/base/parallel.h"

namespace hg {
namespace {

using dnnl::memory;

struct PoolGeometry {
  int64_t n, h, w, c;  // input [N,H,W,C]
  int64_t p, q;        // output [N,P,Q,C]
  Pool2dParams prm;
  dnnl::algorithm algo;
  memory::data_type dt;

  std::string key(const char* what) const {
    return fmt::format("pool2d.{}.{}:{},{},{},{}:k{},{}:s{},{}:p{},{}:t{}", what, int(algo), n, h,
                       w, c, prm.kernel_h, prm.kernel_w, prm.stride_h, prm.stride_w, prm.pad_h,
                       prm.pad_w, int(dt));
  }
  cpu::MemoryDesc src() const { return cpu::nhwc_desc(n, h, w, c, dt); }
  cpu::MemoryDesc dst() const { return cpu::nhwc_desc(n, p, q, c, dt); }
  memory::dims strides() const { return cpu::dims({prm.stride_h, prm.stride_w}); }
  memory::dims kernel() const { return cpu::dims({prm.kernel_h, prm.kernel_w}); }
  // Floor-mode output size: the last window never passes the bottom/right padding, so the
  // same padding on both sides satisfies oneDNN's size check, and every average-pooling
  // window counts exactly kernel_h * kernel_w elements (PyTorch's count_include_pad=True).
  memory::dims padding() const { return cpu::dims({prm.pad_h, prm.pad_w}); }
};

PoolGeometry geometry(const char* op, const Tensor& t, const Pool2dParams& prm,
                      dnnl::algorithm algo) {
  const Shape& x = t.shape();
  PoolGeometry g;
  g.dt = cpu::f32_or_bf16(op, "input", t);
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.p = conv_out_size(g.h, prm.kernel_h, prm.stride_h, prm.pad_h);
  g.q = conv_out_size(g.w, prm.kernel_w, prm.stride_w, prm.pad_w);
  g.prm = prm;
  g.algo = algo;
  return g;
}

using FwdPd = dnnl::pooling_forward::primitive_desc;
using BwdPd = dnnl::pooling_backward::primitive_desc;

struct ForwardPrims {
  FwdPd pd;
  dnnl::pooling_forward prim;
};

const ForwardPrims& forward_prims(const PoolGeometry& g) {
  return cpu::PrimitiveCache::instance().get<ForwardPrims>(g.key("fwd"), [&] {
    // forward_training: max pooling then records the arg-max workspace backward needs.
    dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_training, g.algo, g.src(), g.dst(),
                                  g.strides(), g.kernel(), g.padding(), g.padding());
    FwdPd pd(d, cpu::engine());
    return ForwardPrims{pd, dnnl::pooling_forward(pd)};
  });
}

struct BackwardPrims {
  BwdPd pd;
  dnnl::pooling_backward prim;
};

const BackwardPrims& backward_prims(const PoolGeometry& g) {
  const ForwardPrims& fwd = forward_prims(g);
  return cpu::PrimitiveCache::instance().get<BackwardPrims>(g.key("bwd"), [&] {
    dnnl::pooling_backward::desc d(g.algo, g.src(), g.dst(), g.strides(), g.kernel(), g.padding(),
                                   g.padding());
    BwdPd pd(d, cpu::engine(), fwd.pd);
    return BackwardPrims{pd, dnnl::pooling_backward(pd)};
  });
}

// Runs the forward primitive; `workspace` (max pooling only) receives the arg-max record.
Tensor pool_forward(const Tensor& x, const PoolGeometry& g, Tensor* workspace) {
  const ForwardPrims& fwd = forward_prims(g);
  Tensor y = Tensor::empty({g.n, g.p, g.q, g.c}, x.dtype());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, cpu::wrap(x, g.src())},
                                       {DNNL_ARG_DST, cpu::wrap(y, g.dst())}};
  if (workspace) {
    const cpu::MemoryDesc ws = fwd.pd.workspace_desc();
    *workspace = Tensor::empty({int64_t(ws.get_size())}, DType::U8);
    args.emplace(DNNL_ARG_WORKSPACE, cpu::wrap(*workspace, ws));
  }
  cpu::execute(fwd.prim, args);
  return y;
}

Tensor pool_backward(const char* op, const Tensor& dy, const PoolGeometry& g,
                     const Tensor* workspace) {
  HG_CHECK(cpu::f32_or_bf16(op, "grad output", dy) == g.dt,
           "{}: grad output {} and input differ in dtype", op, dy.describe());
  HG_CHECK(dy.shape() == (Shape{g.n, g.p, g.q, g.c}),
           "{}: grad output {} does not match the pooled shape [{},{},{},{}]", op, dy.describe(),
           g.n, g.p, g.q, g.c);
  const BackwardPrims& bwd = backward_prims(g);
  Tensor dx = Tensor::empty({g.n, g.h, g.w, g.c}, dy.dtype());
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, cpu::wrap(dy, g.dst())},
                                       {DNNL_ARG_DIFF_SRC, cpu::wrap(dx, g.src())}};
  if (workspace) {
    const cpu::MemoryDesc ws = bwd.pd.workspace_desc();
    HG_CHECK(workspace->defined() && workspace->dtype() == DType::U8 &&
                 workspace->is_contiguous() && workspace->nbytes() == ws.get_size() &&
                 workspace->device().is_cpu(),
             "{}: workspace {} is not the one max_pool2d returned for this input and parameters",
             op, workspace->defined() ? workspace->describe() : "undefined");
    args.emplace(DNNL_ARG_WORKSPACE, cpu::wrap(*workspace, ws));
  }
  cpu::execute(bwd.prim, args);
  return dx;
}

}  // namespace

ops::MaxPoolForward CpuBackend::max_pool2d(const Tensor& x, const Pool2dParams& p) {
  ops::MaxPoolForward out;
  out.y =
      pool_forward(x, geometry("max_pool2d", x, p, dnnl::algorithm::pooling_max), &out.workspace);
  return out;
}

Tensor CpuBackend::max_pool2d_backward(const Tensor& dy, const Tensor& x, const Tensor& workspace,
                                       const Pool2dParams& p) {
  return pool_backward("max_pool2d_backward", dy,
                       geometry("max_pool2d_backward", x, p, dnnl::algorithm::pooling_max),
                       &workspace);
}

Tensor CpuBackend::avg_pool2d(const Tensor& x, const Pool2dParams& p) {
  return pool_forward(x, geometry("avg_pool2d", x, p, dnnl::algorithm::pooling_avg_include_padding),
                      nullptr);
}

Tensor CpuBackend::avg_pool2d_backward(const Tensor& dy, const Tensor& x, const Pool2dParams& p) {
  return pool_backward(
      "avg_pool2d_backward", dy,
      geometry("avg_pool2d_backward", x, p, dnnl::algorithm::pooling_avg_include_padding), nullptr);
}

Tensor CpuBackend::global_avg_pool(const Tensor& x) {
  const int64_t n = x.size(0), hw = x.size(1) * x.size(2), c = x.size(3);
  Tensor y = Tensor::empty({n, c}, x.dtype());
  cpu::dispatch_storage("global_avg_pool", x, [&]<typename T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for_inline(n, 1, [&](int64_t n0, int64_t n1) {
      std::vector<double> acc(static_cast<size_t>(c));
      for (int64_t i = n0; i < n1; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const T* row = xp + i * hw * c;
        for (int64_t r = 0; r < hw; ++r, row += c)
          for (int64_t j = 0; j < c; ++j) acc[j] += double(cpu::widen(row[j]));
        for (int64_t j = 0; j < c; ++j)
          yp[i * c + j] = cpu::narrow<T>(cpu::compute_t<T>(acc[j] / double(hw)));
      }
    });
  });
  return y;
}

Tensor CpuBackend::global_avg_pool_backward(const Tensor& dy, const Tensor& x) {
  const int64_t n = x.size(0), hw = x.size(1) * x.size(2), c = x.size(3);
  Tensor dx = Tensor::empty({n, x.size(1), x.size(2), c}, dy.dtype());
  cpu::dispatch_storage("global_avg_pool_backward", dy, [&]<typename T>() {
    const T* dyp = dy.data<T>();
    T* dxp = dx.data<T>();
    parallel_for_inline(n, 1, [&](int64_t n0, int64_t n1) {
      std::vector<T> share(static_cast<size_t>(c));
      for (int64_t i = n0; i < n1; ++i) {
        for (int64_t j = 0; j < c; ++j)
          share[j] =
              cpu::narrow<T>(cpu::compute_t<T>(double(cpu::widen(dyp[i * c + j])) / double(hw)));
        T* row = dxp + i * hw * c;
        for (int64_t r = 0; r < hw; ++r, row += c) std::copy(share.begin(), share.end(), row);
      }
    });
  });
  return dx;
}

}  // namespace hg
