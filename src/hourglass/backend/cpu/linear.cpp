// Linear layer on the CPU, in f32 or bf16 (every operand of a call the same): the three matrix
// products go through oneDNN matmul (JIT GEMM on the
// shared OpenMP pool); the bias gradient is a column sum done here, in double, so it is
// deterministic and independent of the thread count.
//
// Layout tricks: every operand is a plain row-major tensor; a transposed operand is described to
// oneDNN with the "ba" tag (same memory, swapped strides) so no transpose is ever materialised.
//   forward  y  [N,out] = x [N,in]    * w^T [in,out]   (w read as "ba")
//   backward dx [N,in]  = dy [N,out]  * w   [out,in]
//            dw [out,in] = dy^T [out,N] * x [N,in]      (dy read as "ba")
#include <fmt/format.h>

#include <string>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/backend/cpu/dnnl_context.h"
#include "hourglass/backend/cpu/dnnl_util.h"
#include "hourglass/base/parallel.h"

namespace hg {

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

// The operands' common oneDNN type.
dt common_type(const char* op, std::initializer_list<const Tensor*> operands) {
  const Tensor& first = **operands.begin();
  const dt type = cpu::f32_or_bf16(op, "input", first);
  for (const Tensor* t : operands)
    if (t->defined())
      HG_CHECK(t->dtype() == first.dtype(), "cpu {}: operands {} and {} differ in dtype", op,
               first.describe(), t->describe());
  return type;
}

// A matmul primitive for dst[m,n] = src[m,k] * wei[k,n] (+ bias[1,n]), cached by shape and
// layout: creating one costs milliseconds, running a small one microseconds.
dnnl::matmul& cached_matmul(int64_t m, int64_t k, int64_t n, tag src_tag, tag wei_tag,
                            bool with_bias, dt type) {
  const std::string key = fmt::format("linear.matmul:{}x{}x{}:{}:{}:{}:t{}", m, k, n, int(src_tag),
                                      int(wei_tag), with_bias, int(type));
  return cpu::PrimitiveCache::instance().get<dnnl::matmul>(key, [&] {
    const dnnl::memory::desc src(cpu::dims({m, k}), type, src_tag);
    const dnnl::memory::desc wei(cpu::dims({k, n}), type, wei_tag);
    const dnnl::memory::desc dst(cpu::dims({m, n}), type, tag::ab);
    if (with_bias) {
      const dnnl::memory::desc bias(cpu::dims({1, n}), type, tag::ab);
      return dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, dst), cpu::engine()));
    }
    return dnnl::matmul(
        dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), cpu::engine()));
  });
}

// Runs dst = src * wei (+ bias) with the given logical shapes and layouts.
void run_matmul(const Tensor& src, tag src_tag, const Tensor& wei, tag wei_tag, const Tensor& bias,
                Tensor& dst, int64_t m, int64_t k, int64_t n, dt type) {
  const bool with_bias = bias.defined();
  dnnl::matmul& prim = cached_matmul(m, k, n, src_tag, wei_tag, with_bias, type);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, cpu::wrap(src, dnnl::memory::desc(cpu::dims({m, k}), type, src_tag))},
      {DNNL_ARG_WEIGHTS, cpu::wrap(wei, dnnl::memory::desc(cpu::dims({k, n}), type, wei_tag))},
      {DNNL_ARG_DST, cpu::wrap(dst, dnnl::memory::desc(cpu::dims({m, n}), type, tag::ab))}};
  if (with_bias)
    args.emplace(DNNL_ARG_BIAS,
                 cpu::wrap(bias, dnnl::memory::desc(cpu::dims({1, n}), type, tag::ab)));
  prim.execute(cpu::stream(), args);
  cpu::stream().wait();
}

// dbias[j] = sum_i dy[i, j]. Each chunk of columns walks all rows (row-major reads stay
// sequential within a row segment); accumulation is in double in row order, so the result does
// not depend on how columns are split between threads.
Tensor bias_grad(const Tensor& dy) {
  const int64_t rows = dy.size(0), cols = dy.size(1);
  Tensor db = Tensor::empty({cols}, dy.dtype(), dy.device());
  cpu::dispatch_storage("linear_backward", dy, [&]<typename T>() {
    const T* g = dy.data<T>();
    T* out = db.data<T>();
    // About 32k elements per chunk: below that a thread costs more than it saves.
    const int64_t grain = std::max<int64_t>(16, (int64_t(1) << 15) / std::max<int64_t>(rows, 1));
    parallel_for_inline(cols, grain, [&](int64_t c0, int64_t c1) {
      std::vector<double> acc(size_t(c1 - c0), 0.0);
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = g + i * cols;
        for (int64_t j = c0; j < c1; ++j) acc[size_t(j - c0)] += double(cpu::widen(row[j]));
      }
      for (int64_t j = c0; j < c1; ++j)
        out[j] = cpu::narrow<T>(cpu::compute_t<T>(acc[size_t(j - c0)]));
    });
  });
  return db;
}

}  // namespace

Tensor CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const dt type = common_type("linear", {&x, &w, &bias});
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  Tensor y = Tensor::empty({n, out}, x.dtype(), x.device());
  if (n == 0 || out == 0) return y;
  if (in == 0) {  // empty sum: y is the bias (oneDNN rejects zero-sized K)
    y.zero_();
    if (bias.defined())
      for (int64_t i = 0; i < n; ++i) y.narrow(0, i, 1).view({out}).copy_(bias);
    return y;
  }
  run_matmul(x, tag::ab, w, tag::ba, bias, y, n, in, out, type);
  return y;
}

ops::LinearGrads CpuBackend::linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                             bool has_bias, InputGrad input_grad) {
  const dt type = common_type("linear_backward", {&x, &w, &dy});
  const int64_t n = x.size(0), in = x.size(1), out = w.size(0);
  ops::LinearGrads g;
  const bool empty = n == 0 || in == 0 || out == 0;
  if (input_grad == InputGrad::Compute) {
    g.dx = Tensor::empty({n, in}, x.dtype(), x.device());
    if (empty)
      g.dx.zero_();
    else
      run_matmul(dy, tag::ab, w, tag::ab, Tensor(), g.dx, n, out, in, type);
  }
  g.dw = Tensor::empty({out, in}, w.dtype(), x.device());
  if (empty)
    g.dw.zero_();
  else
    run_matmul(dy, tag::ba, x, tag::ab, Tensor(), g.dw, out, n, in, type);
  if (has_bias) g.dbias = bias_grad(dy);
  return g;
}

}  // namespace hg
