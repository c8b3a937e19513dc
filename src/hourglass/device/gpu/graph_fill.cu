// The memset nodes' stand-ins (graph_fill.h): grid-stride loops over the elements.
#include "hourglass/device/gpu/graph_fill.h"

#include <algorithm>

namespace hg::gpu {

namespace {

constexpr unsigned kThreads = 256;

// The grid's x dimension strides over the elements of one target.
__device__ void fill_rows(char* dst, uint32_t value, uint32_t element_size, uint64_t width,
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

__global__ void fill_rows_kernel(char* dst, uint32_t value, uint32_t element_size, uint64_t width,
                                 uint64_t height, uint64_t pitch) {
  fill_rows(dst, value, element_size, width, height, pitch);
}

struct FillTable {
  FillTarget targets[kMaxFillTargets];
};

// Row y of the grid does target y.
__global__ void fill_table_kernel(FillTable table) {
  const FillTarget& t = table.targets[blockIdx.y];
  fill_rows(static_cast<char*>(t.dst), t.value, t.element_size, t.width, t.height, t.pitch);
}

unsigned blocks_for(uint64_t elements) {
  const uint64_t blocks = elements == 0 ? 1 : (elements + kThreads - 1) / kThreads;
  return unsigned(blocks < 1024 ? blocks : 1024);
}

}  // namespace

namespace {

// Adds a kernel node running `func` with `args` on `grid` blocks of kThreads after `deps`.
gpuError_t add_kernel_node(gpuGraphNode_t* node, gpuGraph_t graph, const gpuGraphNode_t* deps,
                           size_t ndeps, void* func, dim3 grid, void** args) {
  gpuKernelNodeParams params = {};
  params.func = func;
  params.gridDim = grid;
  params.blockDim = dim3(kThreads);
  params.sharedMemBytes = 0;
  params.kernelParams = args;
  params.extra = nullptr;
  return gpuGraphAddKernelNode(node, graph, deps, ndeps, &params);
}

}  // namespace

gpuError_t add_fill_node(gpuGraphNode_t* node, gpuGraph_t graph, const gpuGraphNode_t* deps,
                         size_t ndeps, void* dst, uint32_t value, uint32_t element_size,
                         size_t width, size_t height, size_t pitch) {
  char* d = static_cast<char*>(dst);
  uint64_t w = width, h = height, pt = pitch;
  void* args[] = {&d, &value, &element_size, &w, &h, &pt};
  return add_kernel_node(node, graph, deps, ndeps, reinterpret_cast<void*>(&fill_rows_kernel),
                         dim3(blocks_for(uint64_t(width) * height)), args);
}

gpuError_t add_fills_node(gpuGraphNode_t* node, gpuGraph_t graph, const FillTarget* targets,
                          int count) {
  if (count < 1 || count > kMaxFillTargets) return gpuErrorInvalidValue;
  FillTable table = {};
  uint64_t most = 0;
  for (int i = 0; i < count; ++i) {
    table.targets[i] = targets[i];
    most = std::max<uint64_t>(most, targets[i].width * targets[i].height);
  }
  void* args[] = {&table};
  return add_kernel_node(node, graph, nullptr, 0, reinterpret_cast<void*>(&fill_table_kernel),
                         dim3(blocks_for(most), unsigned(count)), args);
}

}  // namespace hg::gpu
