// GPU tests run where a GPU is visible and skip, saying why, where none is (CI, CPU builds).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace hg::test {

// True when this build has a GPU backend and the runtime sees at least one device.
bool gpu_available();
// Why gpu_available() is false ("" when it is true).
std::string gpu_unavailable_reason();

// While alive: new GPU blocks from the caching allocator are poisoned with NaN bytes, so an
// output element a kernel leaves unwritten fails a comparison (no effect without a GPU build).
class PoisonGuard {
 public:
  PoisonGuard();
  ~PoisonGuard();
  PoisonGuard(const PoisonGuard&) = delete;
  PoisonGuard& operator=(const PoisonGuard&) = delete;
};

// What decides the GPU's arithmetic besides hourglass's own code: "<GPU name> <arch>; <dnn
// library and version>; <blas library and version>" of device 0 (the golden checksums' key);
// "" without a GPU.
std::string gpu_arithmetic_identity();

// cuDNN's convolution search tries the NCHW layout only, where it tries it at all (no effect
// without a CUDA build). Before the first convolution is planned.
void search_cudnn_channels_first_only();

}  // namespace hg::test

// First statement of a GPU test: skips it (with the reason) when no GPU is available.
#define HG_REQUIRE_GPU()                                                                    \
  do {                                                                                      \
    if (!::hg::test::gpu_available()) GTEST_SKIP() << ::hg::test::gpu_unavailable_reason(); \
  } while (0)
