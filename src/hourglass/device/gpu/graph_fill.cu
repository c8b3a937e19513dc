// The memset node's stand-in (graph_fill.h): a grid-stride loop over the elements.
#include "hourglass/device/gpu/graph_fill.h"

namespace hg::gpu {

namespace {
__global__ void fill_rows_kernel(char* dst, uint32_t value, uint32_t element_size, uint64_t width,
                                 uint64_t height, uint64_t pitch) {
  const uint64_t n = width * height;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    char* p = dst + (i / width) * pitch + (i % width) * element_size;
    if (element_size == 4)
      *reinterpret_cast<uint32_t*>(p) = value;
    else if (element_size == 2)
      *reinterpret_cast<uint16_t*>(p) = uint16_t(value);
    else
      *p = char(value);
  }
}
}  // namespace

gpuError_t add_fill_node(gpuGraphNode_t* node, gpuGraph_t graph, const gpuGraphNode_t* deps,
                         size_t ndeps, void* dst, uint32_t value, uint32_t element_size,
                         size_t width, size_t height, size_t pitch) {
  constexpr unsigned kThreads = 256;
  const uint64_t n = uint64_t(width) * height;
  const uint64_t blocks = n == 0 ? 1 : (n + kThreads - 1) / kThreads;
  char* d = static_cast<char*>(dst);
  uint64_t w = width, h = height, pt = pitch;
  void* args[] = {&d, &value, &element_size, &w, &h, &pt};
  gpuKernelNodeParams params = {};
  params.func = reinterpret_cast<void*>(&fill_rows_kernel);
  params.gridDim = dim3(unsigned(blocks < 1024 ? blocks : 1024));
  params.blockDim = dim3(kThreads);
  params.sharedMemBytes = 0;
  params.kernelParams = args;
  params.extra = nullptr;
  return gpuGraphAddKernelNode(node, graph, deps, ndeps, &params);
}

}  // namespace hg::gpu
