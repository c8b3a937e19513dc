// What the batch-norm playground programs (bn_variants.cu, reduce_variants.cu) share: the
// library's batch-norm kernels included as source, the few library functions their host side
// calls, a copy kernel (the memory ceiling), random bf16 data, host/device copies and an event
// timer. Included once, by one program's .cu.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hourglass/backend/gpu/batch_norm_kernels.cu"

// What the library's runtime.cpp / dtype.cpp define, enough for the kernels' host side here.
namespace hg {
size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::BF16:
    case DType::F16: return 2;
    default: return 8;
  }
}
namespace gpu {
void throw_gpu_error(gpuError_t err, const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, gpuGetErrorString(err));
  std::exit(1);
}
void unsupported_dtype(const char* op, DType) {
  std::fprintf(stderr, "%s: unsupported dtype\n", op);
  std::exit(1);
}

namespace playground {

__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

inline uint64_t lcg = 0x9e3779b97f4a7c15ull;
inline float uniform() {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return float((lcg >> 40) & 0xffffff) / float(1 << 24);
}
inline uint16_t to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

template <typename T>
T* device_copy(const std::vector<T>& host) {
  T* d = nullptr;
  HG_GPU_CHECK(gpuMalloc(&d, host.size() * sizeof(T)));
  HG_GPU_CHECK(gpuMemcpy(d, host.data(), host.size() * sizeof(T), gpuMemcpyHostToDevice));
  return d;
}
template <typename T>
std::vector<T> host_copy(const T* d, size_t n) {
  std::vector<T> h(n);
  HG_GPU_CHECK(gpuMemcpy(h.data(), d, n * sizeof(T), gpuMemcpyDeviceToHost));
  return h;
}

// Times `body` (a sequence of launches) over `repeats` calls after two warm-ups: microseconds
// a call.
template <typename Body>
double time_us(gpuStream_t s, int repeats, Body&& body) {
  body();
  body();
  gpuEvent_t a, b;
  HG_GPU_CHECK(gpuEventCreate(&a));
  HG_GPU_CHECK(gpuEventCreate(&b));
  HG_GPU_CHECK(gpuEventRecord(a, s));
  for (int i = 0; i < repeats; ++i) body();
  HG_GPU_CHECK(gpuEventRecord(b, s));
  HG_GPU_CHECK(gpuEventSynchronize(b));
  float ms = 0;
  HG_GPU_CHECK(gpuEventElapsedTime(&ms, a, b));
  HG_GPU_CHECK(gpuEventDestroy(a));
  HG_GPU_CHECK(gpuEventDestroy(b));
  return 1000.0 * double(ms) / repeats;
}

}  // namespace playground
}  // namespace gpu
}  // namespace hg
