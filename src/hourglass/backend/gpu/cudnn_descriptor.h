// What the cuDNN wrappers share: the owner of a backend descriptor, the checks of cuDNN calls
// and their errors. CUDA builds only: included by the *_cudnn.cpp files.
#pragma once

#include <cudnn.h>

#include <string>
#include <utility>

#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"

namespace hg::gpu::cudnn {

using dnn::ConvGeometry;

// What a failed call was working on, for the error message (null for handle-level calls).
struct CallContext {
  const ConvGeometry* geometry = nullptr;
  DType dtype = DType::F32;
};

// Reads out cuDNN's last error message (it keeps one per thread until read).
inline std::string take_last_error() {
  char detail[1024] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  return detail;
}

// Throws the Error for a failed cuDNN call: OutOfMemory for allocation failures, InvalidInput
// for an unsupported convolution, Runtime otherwise; the message names the call, cuDNN's
// status and last error message, the convolution and the location.
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                    int line, const CallContext& ctx);

// Checks a cuDNN call; HG_CUDNN_CHECK_FOR names the convolution in the error.
#define HG_CUDNN_CHECK_FOR(call, ctx)                                                          \
  do {                                                                                         \
    const cudnnStatus_t hg_cudnn_status_ = (call);                                             \
    if (hg_cudnn_status_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                                 \
      ::hg::gpu::cudnn::throw_cudnn_error(hg_cudnn_status_, #call, __FILE__, __LINE__, (ctx)); \
  } while (0)
#define HG_CUDNN_CHECK(call) HG_CUDNN_CHECK_FOR(call, ::hg::gpu::cudnn::CallContext{})

// Sets one attribute of a backend descriptor; an error names the attribute.
#define HG_CUDNN_SET(desc, attribute, type, count, values, ctx) \
  HG_CUDNN_CHECK_FOR(cudnnBackendSetAttribute((desc).get(), attribute, type, count, values), ctx)

// Destructors log instead of throwing.
inline void log_if_failed(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    HG_LOG_WARN("{} failed: {}", what, cudnnGetErrorString(status));
}

// Owns one cudnnBackendDescriptor_t.
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(cudnnBackendDescriptorType_t type, const CallContext& ctx) {
    HG_CUDNN_CHECK_FOR(cudnnBackendCreateDescriptor(type, &desc_), ctx);
  }
  Descriptor(Descriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) {
      reset();
      desc_ = std::exchange(other.desc_, nullptr);
    }
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { reset(); }

  // Takes ownership of a descriptor created elsewhere (tuning_cudnn.h).
  static Descriptor adopt(cudnnBackendDescriptor_t raw) {
    Descriptor d;
    d.desc_ = raw;
    return d;
  }
  cudnnBackendDescriptor_t get() const { return desc_; }
  explicit operator bool() const { return desc_ != nullptr; }

 private:
  void reset() {
    if (desc_ != nullptr)
      log_if_failed(cudnnBackendDestroyDescriptor(desc_), "cudnnBackendDestroyDescriptor");
    desc_ = nullptr;
  }
  cudnnBackendDescriptor_t desc_ = nullptr;
};

}  // namespace hg::gpu::cudnn
