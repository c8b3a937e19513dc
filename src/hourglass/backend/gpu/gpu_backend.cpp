// The process's one GPU backend object. Its methods are defined one op per file in this
// folder; it holds no state (streams live per device in the runtime, library handles in the
// dnn and blas wrappers), so one object serves every GPU.
#include "hourglass/backend/gpu/gpu_backend.h"

namespace hg {

Backend& gpu_backend() {
  static GpuBackend backend;
  return backend;
}

}  // namespace hg
