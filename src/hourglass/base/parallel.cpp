#include "hourglass/base/parallel.h"

#include "hourglass/base/error.h"

namespace hg {

int num_threads() { return omp_get_max_threads(); }

void set_num_threads(int n) {
  HG_CHECK(n >= 1, "thread count must be at least 1, got {}", n);
  omp_set_num_threads(n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  parallel_for_inline(n, grain, fn);
}

}  // namespace hg
