// Tensor copies involving GPU memory, and fills. Conversions and strided gathers/scatters run on
// the device (copy_kernels.cu); the host only moves raw bytes.
//
//   host -> device  contiguous, same dtype: one gpuMemcpyAsync on the device's stream. From
//                   ordinary (pageable) memory it returns once the runtime has staged the
//                   source, so the caller may free it at once; from pinned memory the copy is
//                   truly asynchronous, so we wait for it to keep that promise.
//                   Otherwise: the source's bytes (its strided span, or a contiguous host copy
//                   when the span is much larger than the tensor) are uploaded into a temporary
//                   device buffer and converted/scattered into dst there.
//   device -> host  gathered and converted on the device into a contiguous buffer of dst's
//                   dtype (unless src already is one), downloaded, and the stream synchronised:
//                   this is where the host waits for the device. A strided dst is filled from a
//                   contiguous host buffer.
//   device -> device  one kernel (or gpuMemcpyAsync) on the stream, not waited for. Between
//                   two different GPUs the copy goes through host memory (simple and correct;
//                   hourglass does not move tensors between GPUs on a hot path).
#include "hourglass/tensor/gpu/copy.h"

#include <cstring>
#include <vector>

#include "hourglass/base/half.h"
#include "hourglass/device/gpu/copy_kernels.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/tensor/gpu/pinned.h"
#include "hourglass/tensor/tensor.h"

namespace hg::gpu {

namespace {

// Drops size-1 dimensions and merges neighbours that are contiguous in both layouts, so that
// most copies become one dimension (a plain contiguous loop on the device).
CopyLayout make_layout(const char* op, const Shape& shape, const Shape& dst_strides,
                       const Shape& src_strides) {
  std::vector<int64_t> size, dst, src;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!size.empty() && dst.back() == shape[d] * dst_strides[d] &&
        src.back() == shape[d] * src_strides[d]) {
      size.back() *= shape[d];
      dst.back() = dst_strides[d];
      src.back() = src_strides[d];
    } else {
      size.push_back(shape[d]);
      dst.push_back(dst_strides[d]);
      src.push_back(src_strides[d]);
    }
  }
  if (size.empty()) {
    size = {1};
    dst = {1};
    src = {1};
  }
  HG_CHECK(size.size() <= size_t(kMaxCopyDims),
           "gpu {}: a strided layout of shape {} needs {} dimensions after merging the "
           "contiguous ones; the GPU copy supports {} (make the tensor contiguous first)",
           op, shape_str(shape), size.size(), kMaxCopyDims);
  CopyLayout l;
  l.ndim = int(size.size());
  for (int d = 0; d < l.ndim; ++d) {
    HG_ASSERT(dst[size_t(d)] >= 0 && src[size_t(d)] >= 0, "gpu {}: negative stride", op);
    l.shape[d] = size[size_t(d)];
    l.dst_strides[d] = dst[size_t(d)];
    l.src_strides[d] = src[size_t(d)];
  }
  return l;
}

// Elements from t's first element to its last, inclusive (its strides are non-negative).
int64_t span_elements(const Tensor& t) {
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.shape()[size_t(d)] - 1) * t.strides()[size_t(d)];
  return last + 1;
}

// Copies host bytes to the device on `stream`; returns once `host` may be reused.
void upload(void* device, const void* host, size_t bytes, gpuStream_t stream) {
  HG_GPU_CHECK(gpuMemcpyAsync(device, host, bytes, gpuMemcpyHostToDevice, stream));
  if (is_pinned(host)) HG_GPU_CHECK(gpuStreamSynchronize(stream));
}

void download(void* host, const void* device, size_t bytes, gpuStream_t stream) {
  HG_GPU_CHECK(gpuMemcpyAsync(host, device, bytes, gpuMemcpyDeviceToHost, stream));
  HG_GPU_CHECK(gpuStreamSynchronize(stream));
}

void host_to_device(Tensor& dst, const Tensor& src) {
  const int index = dst.device().index;
  set_device(index);
  const gpuStream_t stream = gpu::stream(index);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    upload(dst.data_ptr(), src.data_ptr(), dst.nbytes(), stream);
    return;
  }
  // Upload src's own bytes, then convert and scatter on the device. A view spread thinly over
  // a large buffer is packed on the host first rather than uploading the whole span.
  Tensor host = src;
  int64_t span = span_elements(src);
  if (!src.is_contiguous() && span > 2 * src.numel() + 4096) {
    host = src.contiguous();
    span = host.numel();
  }
  Tensor staged = Tensor::empty({span}, host.dtype(), dst.device());
  upload(staged.data_ptr(), host.data_ptr(), size_t(span) * host.itemsize(), stream);
  launch_copy(dst.data_ptr(), dst.dtype(), staged.data_ptr(), host.dtype(),
              make_layout("copy", dst.shape(), dst.strides(), host.strides()), stream);
  // `staged` goes back to the allocator here; the kernel reading it is ahead of any reuse on
  // the same stream.
}

void device_to_host(Tensor& dst, const Tensor& src) {
  const int index = src.device().index;
  set_device(index);
  const gpuStream_t stream = gpu::stream(index);
  Tensor packed = src;
  if (src.dtype() != dst.dtype() || !src.is_contiguous()) {
    packed = Tensor::empty(src.shape(), dst.dtype(), src.device());
    launch_copy(packed.data_ptr(), packed.dtype(), src.data_ptr(), src.dtype(),
                make_layout("copy", src.shape(), packed.strides(), src.strides()), stream);
  }
  if (dst.is_contiguous()) {
    download(dst.data_ptr(), packed.data_ptr(), dst.nbytes(), stream);
    return;
  }
  Tensor host = Tensor::empty(dst.shape(), dst.dtype(), Device::cpu());
  download(host.data_ptr(), packed.data_ptr(), host.nbytes(), stream);
  dst.copy_(host);  // strided, same dtype, on the CPU
}

void device_to_device(Tensor& dst, const Tensor& src) {
  const int index = dst.device().index;
  set_device(index);
  launch_copy(dst.data_ptr(), dst.dtype(), src.data_ptr(), src.dtype(),
              make_layout("copy", dst.shape(), dst.strides(), src.strides()), stream(index));
}

// The bytes of `value` stored as one element of `dtype`, exactly as the CPU's fill stores it.
uint64_t element_bits(DType dtype, double value) {
  uint64_t bits = 0;
  auto put = [&](auto element) { std::memcpy(&bits, &element, sizeof element); };
  switch (dtype) {
    case DType::F32: put(float(value)); break;
    case DType::F64: put(value); break;
    case DType::F16: put(float_to_f16(float(value))); break;
    case DType::BF16: put(float_to_bf16(float(value))); break;
    case DType::I8: put(int8_t(value)); break;
    case DType::I32: put(int32_t(value)); break;
    case DType::I64: put(int64_t(value)); break;
    case DType::U8: put(uint8_t(value)); break;
  }
  return bits;
}

// True when every byte of the element's pattern is the same (0, -1, ...): then gpuMemset does.
bool uniform_bytes(uint64_t bits, size_t itemsize) {
  const uint64_t byte = bits & 0xff;
  for (size_t b = 1; b < itemsize; ++b)
    if (((bits >> (8 * b)) & 0xff) != byte) return false;
  return true;
}

}  // namespace

void copy(Tensor& dst, const Tensor& src) {
  HG_CHECK(dst.shape() == src.shape(), "copy: shape {} into {}", src.describe(), dst.describe());
  if (dst.numel() == 0) return;
  const Device to = dst.device(), from = src.device();
  if (to.is_cpu() && from.is_cpu()) {
    dst.copy_(src);
  } else if (from.is_cpu()) {
    host_to_device(dst, src);
  } else if (to.is_cpu()) {
    device_to_host(dst, src);
  } else if (to == from) {
    device_to_device(dst, src);
  } else {
    // Between two GPUs: through host memory.
    const Tensor host = src.to(Device::cpu());
    host_to_device(dst, host);
  }
}

void fill(Tensor& t, double value) {
  HG_CHECK(t.device().is_gpu(), "gpu fill of {}: not a GPU tensor", t.describe());
  if (t.numel() == 0) return;
  const int index = t.device().index;
  set_device(index);
  const gpuStream_t stream = gpu::stream(index);
  const uint64_t bits = element_bits(t.dtype(), value);
  const CopyLayout layout = make_layout("fill", t.shape(), t.strides(), t.strides());
  if (layout.ndim == 1 && layout.dst_strides[0] == 1 && uniform_bytes(bits, t.itemsize())) {
    HG_GPU_CHECK(gpuMemsetAsync(t.data_ptr(), int(bits & 0xff), t.nbytes(), stream));
    return;
  }
  launch_fill(t.data_ptr(), t.itemsize(), bits, layout, stream);
}

}  // namespace hg::gpu
