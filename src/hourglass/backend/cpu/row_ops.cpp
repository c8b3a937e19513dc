// Per-row ops of a matrix [N,C] on the CPU (f32 or f64): log_softmax and its backward,
// gather_columns and its backward. Each row's sums are taken in double, in column order, so
// results do not depend on the thread count. scale_rows (any rows-first shape; f32, f64 or bf16
// storage, computed in float or double).
#include <algorithm>
#include <cmath>

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/dispatch.h"
#include "hourglass/backend/cpu/row_loops.h"
#include "hourglass/base/parallel.h"

namespace hg {

using cpu::compute_t;
using cpu::dispatch_float;
using cpu::dispatch_storage;
using cpu::narrow;
using cpu::widen;

using cpu::row_grain;

namespace {

void check_index(const char* op, const Tensor& index, int64_t columns) {
  cpu::check_column_indices(
      op, "index", index, columns,
      "an index must name one of the columns (an action of the action space)");
}

}  // namespace

Tensor CpuBackend::scale_rows(const Tensor& x, const Tensor& scale) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t rows = x.size(0), per_row = rows > 0 ? x.numel() / rows : 0;
  const float* s = scale.data<float>();
  dispatch_storage("scale_rows", x, [&]<typename T>() {
    using C = compute_t<T>;
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    parallel_for(rows, row_grain(per_row), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const C f = C(s[r]);
        for (int64_t i = r * per_row; i < (r + 1) * per_row; ++i)
          dst[i] = narrow<T>(widen(src[i]) * f);
      }
    });
  });
  return y;
}

Tensor CpuBackend::log_softmax(const Tensor& x) {
  const int64_t rows = x.size(0), columns = x.size(1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch_float("log_softmax", x, [&]<typename T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallel_for_inline(rows, row_grain(columns), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = in + r * columns;
        T* yr = out + r * columns;
        T mx = xr[0];
        for (int64_t j = 1; j < columns; ++j) mx = xr[j] > mx ? xr[j] : mx;
        double sum_exp = 0;
        for (int64_t j = 0; j < columns; ++j) sum_exp += std::exp(double(xr[j] - mx));
        const double log_sum = std::log(sum_exp);
        for (int64_t j = 0; j < columns; ++j) yr[j] = T(double(xr[j] - mx) - log_sum);
      }
    });
  });
  return y;
}

Tensor CpuBackend::log_softmax_backward(const Tensor& dy, const Tensor& y) {
  const int64_t rows = y.size(0), columns = y.size(1);
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());
  dispatch_float("log_softmax_backward", y, [&]<typename T>() {
    const T* g = dy.data<T>();
    const T* out = y.data<T>();
    T* d = dx.data<T>();
    parallel_for_inline(rows, row_grain(columns), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* gr = g + r * columns;
        const T* yr = out + r * columns;
        T* dr = d + r * columns;
        double sum = 0;
        for (int64_t j = 0; j < columns; ++j) sum += double(gr[j]);
        for (int64_t j = 0; j < columns; ++j)
          dr[j] = T(double(gr[j]) - std::exp(double(yr[j])) * sum);
      }
    });
  });
  return dx;
}

Tensor CpuBackend::gather_columns(const Tensor& x, const Tensor& index) {
  const int64_t rows = x.size(0), columns = x.size(1);
  check_index("gather_columns", index, columns);
  Tensor out = Tensor::empty({rows}, x.dtype(), x.device());
  const int64_t* idx = index.data<int64_t>();
  dispatch_float("gather_columns", x, [&]<typename T>() {
    const T* in = x.data<T>();
    T* o = out.data<T>();
    for (int64_t r = 0; r < rows; ++r) o[r] = in[r * columns + idx[r]];
  });
  return out;
}

Tensor CpuBackend::gather_columns_backward(const Tensor& dy, const Tensor& index, int64_t columns) {
  const int64_t rows = dy.size(0);
  check_index("gather_columns_backward", index, columns);
  Tensor dx = Tensor::zeros({rows, columns}, dy.dtype(), dy.device());
  const int64_t* idx = index.data<int64_t>();
  dispatch_float("gather_columns_backward", dy, [&]<typename T>() {
    const T* g = dy.data<T>();
    T* d = dx.data<T>();
    for (int64_t r = 0; r < rows; ++r) d[r * columns + idx[r]] = g[r];
  });
  return dx;
}

}  // namespace hg
