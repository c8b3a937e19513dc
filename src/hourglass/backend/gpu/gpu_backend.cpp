// The process's one GPU backend object. Its methods are defined one op per file in this
// folder; it holds no state (streams live per device in the runtime, library handles in the
// dnn and blas wrappers), so one object serves every GPU.
#include "hourglass/backend/gpu/gpu_backend.h"

#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/library_prefetch.h"

namespace hg {

void GpuBackend::prepare(Device device) {
  gpu::prefetch_vendor_libraries();
  gpu::dnn::prepare(device.index);
  gpu::blas::prepare(device.index);
}

Backend& gpu_backend() {
  static GpuBackend backend;
  return backend;
}

}  // namespace hg
