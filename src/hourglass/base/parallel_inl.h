#pragma once

#include <omp.h>

#include <algorithm>

namespace hg {

template <typename Fn>
void parallel_for_inline(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int threads = int(std::min<int64_t>(omp_get_max_threads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t chunk = (n + threads - 1) / threads;
    const int64_t begin = std::min(n, t * chunk);
    const int64_t end = std::min(n, begin + chunk);
    if (begin < end) fn(begin, end);
  }
}

}  // namespace hg
