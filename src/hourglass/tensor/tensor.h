// Tensor: a shared handle to (storage, offset, shape, strides, dtype, device). Copies of a
// Tensor share the same impl; views share storage with a new impl. Activations are NHWC and
// convolution weights KRSC (out, kernel h, kernel w, in/groups) on every backend.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hourglass/base/dtype.h"
#include "hourglass/base/error.h"
#include "hourglass/device/allocator.h"
#include "hourglass/device/device.h"

namespace hg {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

// A block of device memory returned to its allocator when the last holder lets go.
class Storage {
 public:
  Storage(size_t bytes, Device device);
  // Wraps memory owned elsewhere (not freed here); used for pinned buffers and mapped files.
  Storage(void* data, size_t bytes, Device device, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // Memory whose contents are not needed for a while (the parameter arena's gradients between
  // training steps) can go back to its allocator: release() returns it and every view keeps its
  // place; Tensor::data_ptr() of any view then takes new memory, zeroed (restore() takes it,
  // contents undefined). Only memory this storage allocated; a released storage's data() is
  // null.
  void release();
  void restore();
  bool released() const { return released_; }
  bool releasable() const { return allocator_ != nullptr; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;  // null when the memory is owned elsewhere
  std::shared_ptr<void> owner_;
  bool released_ = false;
};

class Tensor;

// A number no other TensorImpl of the process has had (autograd keys gradients by it: unlike
// an address, it is never reused after the impl is freed).
uint64_t next_tensor_id();

struct TensorImpl {
  uint64_t id = next_tensor_id();
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::F32;

  // Autograd: leaves the user marked (parameters) and values computed from them.
  bool requires_grad = false;
  bool is_leaf = true;
  std::shared_ptr<TensorImpl> grad;  // leaves only: accumulated gradient
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::cpu());
  // A CPU tensor holding a copy of `values`.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  static Tensor scalar(double value, DType dtype = DType::F32, Device device = Device::cpu());

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  // size(-1) is the last dimension.
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  size_t itemsize() const { return dtype_size(impl().dtype); }
  size_t nbytes() const { return size_t(numel()) * itemsize(); }
  bool is_contiguous() const;
  // "f32[64,32,32,3] cpu"
  std::string describe() const;

  // The first element's address. A released storage (Storage::release) is taken back first,
  // zeroed: what was released reads as zeros.
  void* data_ptr() const;
  template <typename T>
  T* data() const;  // checks the dtype and that the tensor lives on the CPU
  // zero_(), holding no memory until the next data_ptr() of any view of the storage, which
  // takes new memory, zeroed (Optimizer::zero_grad: the gradients between steps). Where the
  // tensor is not its whole storage, or the storage wraps memory owned elsewhere, a plain
  // zero_().
  void zero_releasing_memory_();

  // ---- views (share storage) ----
  // One dimension may be -1. Requires a contiguous tensor.
  Tensor view(const Shape& shape) const;
  // A view when contiguous, else a contiguous copy reshaped.
  Tensor reshape(const Shape& shape) const;
  // Keeps dimensions before start_dim and flattens the rest into one.
  Tensor flatten(int64_t start_dim = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor permute(const std::vector<int64_t>& order) const;

  // ---- copies ----
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  // Copies src into this tensor elementwise (same shape; dtype and device may differ).
  void copy_(const Tensor& src);
  void fill_(double value);
  void zero_() { fill_(0.0); }

  // ---- host read-back ----
  double item() const;  // one element
  template <typename T>
  std::vector<T> to_vector() const;  // converts to T

  // ---- autograd ----
  bool requires_grad() const { return impl_ && impl().requires_grad; }
  // Marks a leaf whose gradient accumulates into grad().
  Tensor& set_requires_grad(bool value);
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  bool is_leaf() const { return impl().is_leaf; }

  // ---- identity and rebinding ----
  TensorImpl* impl_ptr() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_shared() const { return impl_; }
  std::shared_ptr<Storage> storage() const { return impl().storage; }
  int64_t storage_offset() const { return impl().offset; }
  // Points this tensor (and every handle sharing its impl) at other memory of the same
  // size: how the parameter arena moves parameters into one contiguous buffer.
  void rebind_(std::shared_ptr<Storage> storage, int64_t offset);
  bool same_storage(const Tensor& other) const { return storage() == other.storage(); }

 private:
  TensorImpl& impl() const {
    HG_ASSERT(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Errors naming an op and its operands.
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_dtype(const char* op, const char* what, const Tensor& t, DType expected);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
void check_same_shape(const char* op, const Tensor& a, const Tensor& b);
void check_dim(const char* op, const char* what, const Tensor& t, int64_t dims);

// ---- template definitions ----
template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  HG_CHECK(int64_t(values.size()) == shape_numel(shape),
           "from_vector: {} values do not fill shape {}", values.size(), shape_str(shape));
  Tensor t = empty(shape, dtype_v<T>);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <typename T>
T* Tensor::data() const {
  HG_CHECK(dtype() == dtype_v<T>, "data<{}>() on a tensor {}", dtype_name(dtype_v<T>), describe());
  HG_CHECK(device().is_cpu(), "data() on a tensor {}: copy it to the cpu first", describe());
  return static_cast<T*>(data_ptr());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device::cpu()).to(dtype_v<T>).contiguous();
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}

}  // namespace hg
