// The GPU backend, one source for CUDA and HIP: convolutions through the dnn wrapper (cuDNN /
// MIOpen), matrix products through the blas wrapper (cuBLASLt / hipBLASLt), own kernels for the
// rest. Activations are NHWC, conv weights KRSC; compute dtypes are f32, bf16 and f16 with f32
// accumulation; batch-norm parameters and statistics, losses and optimizer state are f32.
//
// Every method issues its work to the stream of its operands' device (gpu::stream) and returns
// without waiting for it: nothing here synchronises with the host. Methods are defined one op
// per file in this folder.
#pragma once

#include "hourglass/ops/backend.h"

namespace hg {

class GpuBackend final : public Backend {
 public:
  const char* name() const override { return "gpu"; }
  void prepare(Device device) override;

  // One override per HG_OP of the list (op_list.h).
#define HG_OP(ret, name, params, ...) ret name params override;
#include "hourglass/ops/op_list.h"
};

// The process's GPU backend (one object serves every GPU: state lives per device in the
// runtime and the library wrappers).
Backend& gpu_backend();

}  // namespace hg
