// Batch normalisation over channels-last inputs ([N,H,W,C] or [N,C], viewed as [rows, C]) with
// hand-written loops on the OpenMP pool. Activations and their gradients are f32 or bf16 (read
// widened, each output rounded once); parameters, statistics and their gradients are f32. Channels
// are the contiguous dimension, so every loop runs over rows outside and vectorises over channels
// inside without reassociating sums.
//
// Per-channel sums are accumulated in double over fixed blocks of rows whose partition depends
// only on the shape, then combined in block order: results are bit-identical run to run and
// independent of the thread count. One pass gives sum and sum of squares (products of f32
// values are exact in double, so E[x^2] - mean^2 loses nothing that matters for f32 outputs).
#include <algorithm>
#include <cmath>
#include <vector>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/backend/cpu/dnnl_util.h"
#include "hourglass/base/parallel.h"

namespace hg {
namespace {

using cpu::narrow;
using cpu::widen;

// ---- loop bodies over storage type S (float or Bf16), compiled for the baseline ISA and for
// AVX-512 ----

// s[c] += x[c], q[c] += x[c]^2 over `rows` rows.
template <typename S>
[[gnu::always_inline]] inline void sums_body(const S* x, int64_t rows, int64_t c, double* s,
                                             double* q) {
  for (int64_t i = 0; i < rows; ++i, x += c)
    for (int64_t j = 0; j < c; ++j) {
      const double v = widen(x[j]);
      s[j] += v;
      q[j] += v * v;
    }
}

// s[c] += dy[c], q[c] += dy[c] * x[c].
template <typename S>
[[gnu::always_inline]] inline void grad_sums_body(const S* dy, const S* x, int64_t rows, int64_t c,
                                                  double* s, double* q) {
  for (int64_t i = 0; i < rows; ++i, x += c, dy += c)
    for (int64_t j = 0; j < c; ++j) {
      const double g = widen(dy[j]);
      s[j] += g;
      q[j] += g * double(widen(x[j]));
    }
}

// y = (x - mean) * scale + shift.
template <typename S>
[[gnu::always_inline]] inline void normalize_body(const S* x, int64_t rows, int64_t c,
                                                  const float* mean, const float* scale,
                                                  const float* shift, S* y) {
  for (int64_t i = 0; i < rows; ++i, x += c, y += c)
    for (int64_t j = 0; j < c; ++j) y[j] = narrow<S>((widen(x[j]) - mean[j]) * scale[j] + shift[j]);
}

// dx = a * dy - k * (x - mean) + d.
template <typename S>
[[gnu::always_inline]] inline void input_grad_body(const S* dy, const S* x, int64_t rows, int64_t c,
                                                   const float* a, const float* k,
                                                   const float* mean, const float* d, S* dx) {
  for (int64_t i = 0; i < rows; ++i, x += c, dy += c, dx += c)
    for (int64_t j = 0; j < c; ++j)
      dx[j] = narrow<S>(a[j] * widen(dy[j]) - k[j] * (widen(x[j]) - mean[j]) + d[j]);
}

#define HG_BN_KERNELS(SUFFIX, ATTR)                                                               \
  template <typename S>                                                                           \
  ATTR void sums_##SUFFIX(const S* x, int64_t rows, int64_t c, double* s, double* q) {            \
    sums_body(x, rows, c, s, q);                                                                  \
  }                                                                                               \
  template <typename S>                                                                           \
  ATTR void grad_sums_##SUFFIX(const S* dy, const S* x, int64_t rows, int64_t c, double* s,       \
                               double* q) {                                                       \
    grad_sums_body(dy, x, rows, c, s, q);                                                         \
  }                                                                                               \
  template <typename S>                                                                           \
  ATTR void normalize_##SUFFIX(const S* x, int64_t rows, int64_t c, const float* mean,            \
                               const float* scale, const float* shift, S* y) {                    \
    normalize_body(x, rows, c, mean, scale, shift, y);                                            \
  }                                                                                               \
  template <typename S>                                                                           \
  ATTR void input_grad_##SUFFIX(const S* dy, const S* x, int64_t rows, int64_t c, const float* a, \
                                const float* k, const float* mean, const float* d, S* dx) {       \
    input_grad_body(dy, x, rows, c, a, k, mean, d, dx);                                           \
  }

HG_BN_KERNELS(base, )
HG_BN_KERNELS(avx512, HG_TARGET_AVX512)
#undef HG_BN_KERNELS

template <typename S>
struct Kernels {
  decltype(&sums_base<S>) sums;
  decltype(&grad_sums_base<S>) grad_sums;
  decltype(&normalize_base<S>) normalize;
  decltype(&input_grad_base<S>) input_grad;
};

template <typename S>
const Kernels<S>& kernels() {
  static const Kernels<S> k =
      cpu::has_avx512()
          ? Kernels<S>{sums_avx512<S>, grad_sums_avx512<S>, normalize_avx512<S>,
                       input_grad_avx512<S>}
          : Kernels<S>{sums_base<S>, grad_sums_base<S>, normalize_base<S>, input_grad_base<S>};
  return k;
}

// Calls body.template operator()<S>() with S = float or Bf16, x's dtype.
template <typename Body>
void dispatch_activation(const char* op, const Tensor& x, Body&& body) {
  switch (x.dtype()) {
    case DType::F32: return body.template operator()<float>();
    case DType::BF16: return body.template operator()<Bf16>();
    default:
      throw_invalid(
          fmt::format("cpu {}: supports f32 and bf16 activations, got {}", op, x.describe()),
          "convert the tensor with .to(DType::F32) first");
  }
}

// ---- drivers ----

// Rows per reduction block: about 16K values, so the partials stay small and there are enough
// blocks for every thread. Depends only on the shape (determinism).
int64_t rows_per_block(int64_t c) { return std::max<int64_t>(1, 16384 / c); }

// Rows per elementwise chunk: enough work to amortise the fork.
int64_t elementwise_grain(int64_t c) { return std::max<int64_t>(1, 8192 / c); }

// Per-channel (sum a, sum b) over all rows, where `block_fn(first_row, rows, s, q)` adds one
// block's contribution into zeroed s and q.
template <typename BlockFn>
void channel_sums(int64_t rows, int64_t c, std::vector<double>& sum_a, std::vector<double>& sum_b,
                  const BlockFn& block_fn) {
  const int64_t block = rows_per_block(c);
  const int64_t blocks = (rows + block - 1) / block;
  std::vector<double> partial(size_t(blocks * 2 * c), 0.0);
  parallel_for_inline(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double* s = partial.data() + b * 2 * c;
      const int64_t first = b * block;
      block_fn(first, std::min(block, rows - first), s, s + c);
    }
  });
  sum_a.assign(size_t(c), 0.0);
  sum_b.assign(size_t(c), 0.0);
  for (int64_t b = 0; b < blocks; ++b) {  // fixed order
    const double* s = partial.data() + b * 2 * c;
    for (int64_t j = 0; j < c; ++j) {
      sum_a[j] += s[j];
      sum_b[j] += s[c + j];
    }
  }
}

// y = (x - mean) * scale + shift over [rows, c], in x's dtype.
Tensor normalize(const Tensor& x, const std::vector<float>& mean, const std::vector<float>& scale,
                 const std::vector<float>& shift) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_activation("batch_norm", x, [&]<typename S>() {
    const S* xp = x.data<S>();
    S* yp = y.data<S>();
    const auto fn = kernels<S>().normalize;
    parallel_for_inline(rows, elementwise_grain(c), [&](int64_t r0, int64_t r1) {
      fn(xp + r0 * c, r1 - r0, c, mean.data(), scale.data(), shift.data(), yp + r0 * c);
    });
  });
  return y;
}

std::vector<float> host_floats(const Tensor& t) { return t.to_vector<float>(); }

void check_params(const char* op, const Tensor& x, std::initializer_list<const Tensor*> params) {
  HG_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::BF16,
           "{}: the cpu backend takes f32 or bf16 activations, the input is {}", op, x.describe());
  for (const Tensor* t : params) {
    cpu::check_f32(op, "parameter", *t);
    HG_CHECK(t->dim() == 1 && t->size(0) == x.size(-1), "{}: parameter {} must have shape [{}]", op,
             t->describe(), x.size(-1));
  }
}

}  // namespace

ops::BatchNormForward CpuBackend::plain_batch_norm_train(const Tensor& x, const Tensor& weight,
                                                         const Tensor& bias, Tensor& running_mean,
                                                         Tensor& running_var, double momentum,
                                                         double eps) {
  const char* op = "batch_norm";
  check_params(op, x, {&weight, &bias, &running_mean, &running_var});
  HG_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(),
           "{}: running statistics must be contiguous (they are updated in place)", op);
  const int64_t c = x.size(-1), rows = x.numel() / c;
  std::vector<double> sum, sum_sq;
  dispatch_activation(op, x, [&]<typename S>() {
    const S* xp = x.data<S>();
    const auto sums = kernels<S>().sums;
    channel_sums(rows, c, sum, sum_sq, [&](int64_t first, int64_t n, double* s, double* q) {
      sums(xp + first * c, n, c, s, q);
    });
  });

  const std::vector<float> w = host_floats(weight), b = host_floats(bias);
  const size_t cs = static_cast<size_t>(c);
  std::vector<float> mean(cs), scale(cs);
  ops::BatchNormForward out;
  out.mean = Tensor::empty({c});
  out.invstd = Tensor::empty({c});
  float* rm = running_mean.data<float>();
  float* rv = running_var.data<float>();
  const double count = double(rows);
  for (int64_t j = 0; j < c; ++j) {
    const double m = sum[j] / count;
    const double var = std::max(0.0, sum_sq[j] / count - m * m);  // biased, for normalising
    const double invstd = 1.0 / std::sqrt(var + eps);
    mean[j] = float(m);
    scale[j] = float(double(w[j]) * invstd);
    out.mean.data<float>()[j] = float(m);
    out.invstd.data<float>()[j] = float(invstd);
    // PyTorch: running = (1 - momentum) * running + momentum * batch, unbiased variance.
    rm[j] = float((1.0 - momentum) * rm[j] + momentum * m);
    rv[j] = float((1.0 - momentum) * rv[j] + momentum * var * count / (count - 1.0));
  }
  out.y = normalize(x, mean, scale, b);
  return out;
}

Tensor CpuBackend::batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   double eps) {
  check_params("batch_norm", x, {&weight, &bias, &running_mean, &running_var});
  const int64_t c = x.size(-1);
  const std::vector<float> w = host_floats(weight), mean = host_floats(running_mean),
                           var = host_floats(running_var), b = host_floats(bias);
  const size_t cs = static_cast<size_t>(c);
  std::vector<float> scale(cs);
  for (int64_t j = 0; j < c; ++j) scale[j] = float(w[j] / std::sqrt(double(var[j]) + eps));
  return normalize(x, mean, scale, b);
}

ops::BatchNormGrads CpuBackend::plain_batch_norm_backward(const Tensor& dy, const Tensor& x,
                                                          const Tensor& weight, const Tensor& mean,
                                                          const Tensor& invstd) {
  const char* op = "batch_norm_backward";
  check_params(op, x, {&weight, &mean, &invstd});
  HG_CHECK(dy.dtype() == x.dtype(), "{}: grad output {} and input {} differ in dtype", op,
           dy.describe(), x.describe());
  const int64_t c = x.size(-1), rows = x.numel() / c;
  std::vector<double> sum_dy, sum_dy_x;
  dispatch_activation(op, x, [&]<typename S>() {
    const S* xp = x.data<S>();
    const S* dyp = dy.data<S>();
    const auto grad_sums = kernels<S>().grad_sums;
    channel_sums(rows, c, sum_dy, sum_dy_x, [&](int64_t first, int64_t n, double* s, double* q) {
      grad_sums(dyp + first * c, xp + first * c, n, c, s, q);
    });
  });

  // With xhat = (x - mean) * invstd:
  //   dbias = sum dy,  dweight = sum dy * xhat = invstd * (sum dy x - mean sum dy),
  //   dx = w invstd (dy - dbias / M) - w invstd^2 dweight / M * (x - mean).
  const std::vector<float> w = host_floats(weight), mu = host_floats(mean),
                           is = host_floats(invstd);
  const size_t cs = static_cast<size_t>(c);
  std::vector<float> a(cs), k(cs), d(cs);
  ops::BatchNormGrads grads;
  grads.dweight = Tensor::empty({c});
  grads.dbias = Tensor::empty({c});
  const double count = double(rows);
  for (int64_t j = 0; j < c; ++j) {
    const double inv = is[j];
    const double dbias = sum_dy[j];
    const double dweight = inv * (sum_dy_x[j] - double(mu[j]) * sum_dy[j]);
    const double aj = double(w[j]) * inv;
    a[j] = float(aj);
    k[j] = float(aj * inv * dweight / count);
    d[j] = float(-aj * dbias / count);
    grads.dweight.data<float>()[j] = float(dweight);
    grads.dbias.data<float>()[j] = float(dbias);
  }
  grads.dx = Tensor::empty(x.shape(), x.dtype());
  dispatch_activation(op, x, [&]<typename S>() {
    const S* xp = x.data<S>();
    const S* dyp = dy.data<S>();
    S* dxp = grads.dx.data<S>();
    const auto input_grad = kernels<S>().input_grad;
    parallel_for_inline(rows, elementwise_grain(c), [&](int64_t r0, int64_t r1) {
      input_grad(dyp + r0 * c, xp + r0 * c, r1 - r0, c, a.data(), k.data(), mu.data(), d.data(),
                 dxp + r0 * c);
    });
  });
  return grads;
}

}  // namespace hg
