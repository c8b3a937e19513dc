#include "hourglass/tensor/gpu/pinned.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "hourglass/base/error.h"
#include "hourglass/base/half.h"
#include "hourglass/base/log.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/tensor/tensor.h"

namespace hg::gpu {

bool is_pinned(const void* host) {
  gpuPointerAttributes attr{};
  if (gpuPointerGetAttributes(&attr, host) != gpuSuccess) {
    (void)gpuGetLastError();  // pageable memory on runtimes that report it as an error
    return false;
  }
  return HG_GPU_POINTER_TYPE(attr) == gpuMemoryTypeHost;
}

// ---------------------------------------------------------------- PinnedBuffer

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const gpuError_t err = gpuMallocHost(&data_, bytes);
  if (err != gpuSuccess) {
    (void)gpuGetLastError();
    data_ = nullptr;
    throw Error(ErrorKind::OutOfMemory,
                fmt::format("could not pin {} bytes of host memory: {} ({})", bytes,
                            gpuGetErrorName(err), gpuGetErrorString(err)),
                "free host memory, or raise the locked-memory limit (ulimit -l; in a container "
                "--ulimit memlock=-1)");
  }
}

PinnedBuffer::~PinnedBuffer() { reset(); }

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::reset() noexcept {
  if (!data_) return;
  const gpuError_t err = gpuFreeHost(data_);
  if (err != gpuSuccess) {
    (void)gpuGetLastError();
    HG_LOG_WARN("freeing {} bytes of pinned host memory failed: {}", bytes_, gpuGetErrorName(err));
  }
  data_ = nullptr;
  bytes_ = 0;
}

// ---------------------------------------------------------------- AsyncScalar

namespace {
gpuEvent_t as_event(void* e) { return static_cast<gpuEvent_t>(e); }
}  // namespace

AsyncScalar::AsyncScalar() = default;

AsyncScalar::~AsyncScalar() {
  if (!event_) return;
  // The copy into buffer_ must be finished before the buffer is freed.
  if (gpuEventSynchronize(as_event(event_)) != gpuSuccess ||
      gpuEventDestroy(as_event(event_)) != gpuSuccess) {
    (void)gpuGetLastError();
    HG_LOG_WARN("releasing an asynchronous scalar read's event failed");
  }
}

void AsyncScalar::start(const Tensor& scalar) {
  HG_CHECK(scalar.numel() == 1 && scalar.device().is_gpu(),
           "AsyncScalar::start: needs a one-element GPU tensor, got {}", scalar.describe());
  const int index = scalar.device().index;
  set_device(index);
  if (!buffer_.data()) buffer_ = PinnedBuffer(sizeof(double));
  if (event_ && device_ != index) {
    HG_GPU_CHECK(gpuEventSynchronize(as_event(event_)));
    HG_GPU_CHECK(gpuEventDestroy(as_event(event_)));
    event_ = nullptr;
  }
  if (!event_) {
    gpuEvent_t event = nullptr;
    HG_GPU_CHECK(gpuEventCreateWithFlags(&event, gpuEventDisableTiming));
    event_ = event;
  }
  const gpuStream_t stream = gpu::stream(index);
  HG_GPU_CHECK(gpuMemcpyAsync(buffer_.data(), scalar.data_ptr(), scalar.itemsize(),
                              gpuMemcpyDeviceToHost, stream));
  HG_GPU_CHECK(gpuEventRecord(as_event(event_), stream));
  device_ = index;
  dtype_ = scalar.dtype();
}

bool AsyncScalar::ready() const {
  if (!started()) return false;
  const gpuError_t err = gpuEventQuery(as_event(event_));
  if (err == gpuSuccess) return true;
  if (err == gpuErrorNotReady) {
    (void)gpuGetLastError();
    return false;
  }
  throw_gpu_error(err, "gpuEventQuery", __FILE__, __LINE__);
}

double AsyncScalar::value() const {
  HG_ASSERT(started(), "AsyncScalar::value() before start()");
  HG_GPU_CHECK(gpuEventSynchronize(as_event(event_)));
  const void* p = buffer_.data();
  auto read = [p]<typename T>() {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (dtype_) {
    case DType::F32: return read.operator()<float>();
    case DType::F64: return read.operator()<double>();
    case DType::F16: return f16_to_float(read.operator()<uint16_t>());
    case DType::BF16: return bf16_to_float(read.operator()<uint16_t>());
    case DType::I8: return read.operator()<int8_t>();
    case DType::I32: return read.operator()<int32_t>();
    case DType::I64: return double(read.operator()<int64_t>());
    case DType::U8: return read.operator()<uint8_t>();
  }
  return 0;
}

}  // namespace hg::gpu
