// cudnn_descriptor.h's error: what every cuDNN wrapper throws for a failed call.
#include "hourglass/backend/gpu/cudnn_descriptor.h"

#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

[[noreturn]] void cudnn::throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                           int line, const CallContext& ctx) {
  const std::string detail = take_last_error();
  std::string message = fmt::format("{} failed: {}", call, cudnnGetErrorString(status));
  if (!detail.empty()) message += fmt::format(" ({})", detail);
  if (ctx.geometry != nullptr)
    message +=
        fmt::format(" for the {} convolution {}", dtype_name(ctx.dtype), ctx.geometry->describe());
  message += fmt::format(" at {}:{}", file, line);
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    throw Error(ErrorKind::OutOfMemory, message, gpu::out_of_memory_remedy());
  switch (CUDNN_STATUS_CATEGORY(status)) {
    case CUDNN_STATUS_NOT_SUPPORTED:
      throw Error(ErrorKind::InvalidInput, message,
                  "cuDNN has no kernel for this convolution on this GPU: change its shape, "
                  "padding, dilation or groups, use another precision, or device = \"cpu\"");
    case CUDNN_STATUS_NOT_INITIALIZED:
      throw Error(ErrorKind::Runtime, message,
                  "cuDNN could not start: check that the cuDNN 9 libraries (libcudnn*.so.9) "
                  "are on the library path and match the driver; `hourglass doctor` checks the "
                  "GPU stack");
    default:
      throw Error(ErrorKind::Runtime, message,
                  "an earlier kernel may have failed: rerun with CUDA_LAUNCH_BLOCKING=1 to find "
                  "it; `hourglass doctor` checks the GPU stack");
  }
}

}  // namespace hg::gpu
