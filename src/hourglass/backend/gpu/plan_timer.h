// Times a candidate algorithm during a first call's search (cuDNN's engine search in
// dnn_cudnn.cpp, cuBLASLt's heuristic list in blas_cublaslt.cpp): events on the device's
// stream around its runs. Synchronises: searches run only on a shape's first call, never during
// a graph capture.
#pragma once

#include <algorithm>
#include <array>

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

class PlanTimer {
 public:
  explicit PlanTimer(gpuStream_t stream) : stream_(stream) {
    HG_GPU_CHECK(gpuEventCreate(&start_));
    HG_GPU_CHECK(gpuEventCreate(&stop_));
  }
  ~PlanTimer() {
    (void)gpuEventDestroy(start_);
    (void)gpuEventDestroy(stop_);
  }
  PlanTimer(const PlanTimer&) = delete;
  PlanTimer& operator=(const PlanTimer&) = delete;

  // Milliseconds per run of `run` (a callable returning whether its launch succeeded): one
  // untimed run (loads the kernels), then one timed; two more only when that one is within twice
  // `best_ms` (negative: no best yet), the median of the three counting. A run that fails gives
  // a negative time; its launch error is cleared (it is not sticky), the library's own error
  // state is the caller's to read.
  template <typename Run>
  float time(Run run, float best_ms) {
    if (!run()) return fail();
    std::array<float, 3> ms{};
    for (size_t i = 0; i < ms.size(); ++i) {
      HG_GPU_CHECK(gpuEventRecord(start_, stream_));
      if (!run()) return fail();
      HG_GPU_CHECK(gpuEventRecord(stop_, stream_));
      HG_GPU_CHECK(gpuEventSynchronize(stop_));
      HG_GPU_CHECK(gpuEventElapsedTime(&ms[i], start_, stop_));
      if (i == 0 && best_ms > 0 && ms[0] > 2 * best_ms) return ms[0];
    }
    std::sort(ms.begin(), ms.end());
    return ms[1];
  }

 private:
  static float fail() {
    (void)gpuGetLastError();
    return -1.0f;
  }
  gpuStream_t stream_;
  gpuEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace hg::gpu
