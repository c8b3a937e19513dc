// The one CPU thread pool: OpenMP's, which oneDNN also runs on. A second pool (std::thread
// workers, or a pthread BLAS) spinning beside it on a small machine halves throughput, so every
// CPU loop in hourglass goes through parallel_for.
#pragma once

#include <cstdint>
#include <functional>

namespace hg {

int num_threads();
void set_num_threads(int n);

// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks of at least `grain` items.
// The partition depends only on n, grain and the thread count, so results that combine
// per-chunk partial values in chunk order are reproducible.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Inline-able variant for hot loops: same contract, templated body.
template <typename Fn>
void parallel_for_inline(int64_t n, int64_t grain, Fn&& fn);

}  // namespace hg

#include "hourglass/base/parallel_inl.h"
