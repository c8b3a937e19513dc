// What the CPU kernels over the rows of a matrix [N,C] share (softmax cross-entropy,
// log_softmax, gather_columns): the chunk of rows a thread takes, and the check of a column
// index per row.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "hourglass/base/error.h"
#include "hourglass/tensor/tensor.h"

namespace hg::cpu {

// Rows per chunk so that a chunk holds ~16k elements: exp dominates these loops, so threads pay
// off early.
inline int64_t row_grain(int64_t columns) {
  return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(columns, 1));
}

// Each row's column index (i64 [N]) in [0, columns), checked up front and serially (an
// exception must not escape an OpenMP region, and a bad index would read outside the row):
// InvalidInput "<op>: <what> <v> in row <r> is outside [0, <columns>)" with `remedy`.
inline void check_column_indices(const char* op, const char* what, const Tensor& index,
                                 int64_t columns, const char* remedy) {
  const int64_t* idx = index.data<int64_t>();
  for (int64_t r = 0; r < index.numel(); ++r)
    if (idx[r] < 0 || idx[r] >= columns) [[unlikely]]
      throw_invalid(
          fmt::format("{}: {} {} in row {} is outside [0, {})", op, what, idx[r], r, columns),
          remedy);
}

}  // namespace hg::cpu
