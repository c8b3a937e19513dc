#include "hourglass/tensor/tensor.h"

#include <atomic>

#include <cstring>
#include <numeric>

#include "hourglass/base/half.h"
#include "hourglass/base/parallel.h"
#ifdef HOURGLASS_HAS_GPU
#include "hourglass/tensor/gpu/copy.h"
#endif

namespace hg {

// ---------------------------------------------------------------- shapes

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

// ---------------------------------------------------------------- storage

Storage::Storage(size_t bytes, Device device)
    : bytes_(bytes), device_(device), allocator_(&allocator_for(device)) {
  data_ = allocator_->allocate(bytes);
}

Storage::Storage(void* data, size_t bytes, Device device, std::shared_ptr<void> owner)
    : data_(data), bytes_(bytes), device_(device), owner_(std::move(owner)) {}

Storage::~Storage() {
  if (allocator_ && !released_) allocator_->deallocate(data_, bytes_);
}

void Storage::release() {
  HG_CHECK(allocator_ != nullptr, "only a storage that allocated its memory can release it");
  if (released_) return;
  allocator_->deallocate(data_, bytes_);
  data_ = nullptr;
  released_ = true;
}

void Storage::restore() {
  if (!released_) return;
  data_ = allocator_->allocate(bytes_);
  released_ = false;
}

// ---------------------------------------------------------------- creation

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    HG_CHECK(d >= 0, "cannot create a tensor of shape {}: negative size", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

// ---------------------------------------------------------------- properties

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  if (d < 0) d += n;
  HG_CHECK(d >= 0 && d < n, "dimension {} out of range for tensor {}", d, describe());
  return impl().shape[size_t(d)];
}

bool Tensor::is_contiguous() const {
  const auto& sh = impl().shape;
  const auto& st = impl().strides;
  int64_t expected = 1;
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sh[i];
  }
  return true;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return fmt::format("{}{} {}", dtype_name(dtype()), shape_str(shape()), device().str());
}

void* Tensor::data_ptr() const {
  Storage& storage = *impl().storage;
  if (storage.released()) [[unlikely]] {
    storage.restore();
    // The whole storage as bytes, zeroed (one fill; on a GPU in the device's stream order).
    auto whole = std::make_shared<TensorImpl>();
    whole->storage = impl().storage;
    whole->shape = {int64_t(storage.bytes())};
    whole->strides = {1};
    whole->dtype = DType::U8;
    Tensor(whole).zero_();
  }
  return static_cast<char*>(storage.data()) + impl().offset * int64_t(itemsize());
}

void Tensor::zero_releasing_memory_() {
  Storage& storage = *impl().storage;
  if (storage.releasable() && impl().offset == 0 && is_contiguous() && nbytes() == storage.bytes())
    storage.release();
  else
    zero_();
}

// ---------------------------------------------------------------- views

uint64_t next_tensor_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

static std::shared_ptr<TensorImpl> view_impl(const TensorImpl& src) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = src.storage;
  impl->offset = src.offset;
  impl->dtype = src.dtype;
  return impl;
}

static Shape infer_shape(const Shape& requested, int64_t numel, const std::string& what) {
  Shape shape = requested;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      HG_CHECK(infer < 0, "{}: only one dimension may be -1 in {}", what, shape_str(requested));
      infer = int(i);
    } else {
      HG_CHECK(shape[i] >= 0, "{}: bad size in {}", what, shape_str(requested));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    HG_CHECK(known > 0 && numel % known == 0, "{}: cannot infer -1 in {} for {} elements", what,
             shape_str(requested), numel);
    shape[size_t(infer)] = numel / known;
  }
  HG_CHECK(shape_numel(shape) == numel, "{}: shape {} does not hold {} elements", what,
           shape_str(requested), numel);
  return shape;
}

Tensor Tensor::view(const Shape& shape) const {
  HG_CHECK(is_contiguous(), "view of non-contiguous tensor {}: use reshape", describe());
  auto impl = view_impl(this->impl());
  impl->shape = infer_shape(shape, numel(), "view of " + describe());
  impl->strides = contiguous_strides(impl->shape);
  return Tensor(std::move(impl));
}

Tensor Tensor::reshape(const Shape& shape) const {
  return is_contiguous() ? view(shape) : contiguous().view(shape);
}

Tensor Tensor::flatten(int64_t start_dim) const {
  HG_CHECK(start_dim >= 0 && start_dim <= dim(), "flatten({}) of {}", start_dim, describe());
  Shape s(shape().begin(), shape().begin() + start_dim);
  int64_t rest = 1;
  for (int64_t i = start_dim; i < dim(); ++i) rest *= shape()[size_t(i)];
  s.push_back(rest);
  return reshape(s);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  if (d < 0) d += dim();
  HG_CHECK(d >= 0 && d < dim(), "narrow: dimension {} out of range for {}", d, describe());
  HG_CHECK(start >= 0 && length >= 0 && start + length <= shape()[size_t(d)],
           "narrow: [{}, {}) out of range of dimension {} of {}", start, start + length, d,
           describe());
  auto impl = view_impl(this->impl());
  impl->shape = shape();
  impl->strides = strides();
  impl->offset += start * strides()[size_t(d)];
  impl->shape[size_t(d)] = length;
  return Tensor(std::move(impl));
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  HG_CHECK(int64_t(order.size()) == dim(), "permute: {} axes for {}", order.size(), describe());
  std::vector<bool> seen(order.size(), false);
  auto impl = view_impl(this->impl());
  for (int64_t axis : order) {
    HG_CHECK(axis >= 0 && axis < dim() && !seen[size_t(axis)], "permute: bad axis order for {}",
             describe());
    seen[size_t(axis)] = true;
    impl->shape.push_back(shape()[size_t(axis)]);
    impl->strides.push_back(strides()[size_t(axis)]);
  }
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- copies

namespace {

// Reads element i of a typed buffer as double / writes a double.
double load(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::F16: return f16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::I8: return static_cast<const int8_t*>(p)[i];
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::I64: return double(static_cast<const int64_t*>(p)[i]);
    case DType::U8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

void store(void* p, DType dt, int64_t i, double v) {
  switch (dt) {
    case DType::F32: static_cast<float*>(p)[i] = float(v); break;
    case DType::F64: static_cast<double*>(p)[i] = v; break;
    case DType::F16: static_cast<uint16_t*>(p)[i] = float_to_f16(float(v)); break;
    case DType::BF16: static_cast<uint16_t*>(p)[i] = float_to_bf16(float(v)); break;
    case DType::I8: static_cast<int8_t*>(p)[i] = int8_t(v); break;
    case DType::I32: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case DType::I64: static_cast<int64_t*>(p)[i] = int64_t(v); break;
    case DType::U8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
  }
}

// Offset (in elements) of linear index `linear` in a strided layout.
int64_t strided_offset(int64_t linear, const Shape& shape, const Shape& strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t idx = linear % shape[d];
    linear /= shape[d];
    off += idx * strides[d];
  }
  return off;
}

void cpu_copy(Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  const bool contiguous = dst.is_contiguous() && src.is_contiguous();
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  if (contiguous && dst.dtype() == src.dtype()) {
    std::memcpy(d, s, dst.nbytes());
    return;
  }
  if (contiguous && src.dtype() == DType::F32 && dst.dtype() == DType::BF16) {
    parallel_for_inline(n, 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        reinterpret_cast<uint16_t*>(d)[i] = float_to_bf16(reinterpret_cast<const float*>(s)[i]);
    });
    return;
  }
  if (contiguous && src.dtype() == DType::BF16 && dst.dtype() == DType::F32) {
    parallel_for_inline(n, 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        reinterpret_cast<float*>(d)[i] = bf16_to_float(reinterpret_cast<const uint16_t*>(s)[i]);
    });
    return;
  }
  const DType ddt = dst.dtype(), sdt = src.dtype();
  const Shape& shape = dst.shape();
  const Shape &dstr = dst.strides(), &sstr = src.strides();
  const bool same = ddt == sdt;
  const size_t item = dst.itemsize();
  parallel_for_inline(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t doff = contiguous ? i : strided_offset(i, shape, dstr);
      const int64_t soff = contiguous ? i : strided_offset(i, shape, sstr);
      if (same)
        std::memcpy(d + doff * int64_t(item), s + soff * int64_t(item), item);
      else
        store(d, ddt, doff, load(s, sdt, soff));
    }
  });
}

}  // namespace

void Tensor::copy_(const Tensor& src) {
  HG_CHECK(shape() == src.shape(), "copy_: shape {} into {}", src.describe(), describe());
  if (numel() == 0) return;
  if (device().is_cpu() && src.device().is_cpu()) {
    cpu_copy(*this, src);
    return;
  }
#ifdef HOURGLASS_HAS_GPU
  gpu::copy(*this, src);
#else
  throw_invalid(
      fmt::format("copy_ from {} to {}: no GPU backend in this build", src.describe(), describe()),
      "use device = \"cpu\", or rebuild with -DHOURGLASS_GPU=cuda or hip");
#endif
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = empty(shape(), dtype(), target);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target, device());
  out.copy_(*this);
  return out;
}

void Tensor::fill_(double value) {
  if (numel() == 0) return;
#ifdef HOURGLASS_HAS_GPU
  if (!device().is_cpu()) {  // a kernel: no host round trip (the step zeroes its sums)
    gpu::fill(*this, value);
    return;
  }
#endif
  if (is_contiguous() && value == 0.0) {
    std::memset(data_ptr(), 0, nbytes());
    return;
  }
  void* p = data_ptr();
  const DType dt = dtype();
  const bool contiguous = is_contiguous();
  const Shape& sh = shape();
  const Shape& st = strides();
  parallel_for_inline(numel(), 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) store(p, dt, contiguous ? i : strided_offset(i, sh, st), value);
  });
}

double Tensor::item() const {
  HG_CHECK(numel() == 1, "item() of tensor {} with {} elements", describe(), numel());
  Tensor host = to(Device::cpu());
  return load(host.data_ptr(), host.dtype(), 0);
}

// ---------------------------------------------------------------- autograd fields

Tensor& Tensor::set_requires_grad(bool value) {
  HG_CHECK(!value || is_floating(dtype()), "requires_grad on non-floating tensor {}", describe());
  impl().requires_grad = value;
  impl().is_leaf = true;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined()) check_same_shape("set_grad", *this, grad);
  impl().grad = grad.impl_shared();
}

void Tensor::rebind_(std::shared_ptr<Storage> storage, int64_t offset) {
  HG_ASSERT(is_contiguous(), "rebind of non-contiguous tensor");
  HG_ASSERT(size_t(offset) * itemsize() + nbytes() <= storage->bytes(), "rebind out of range");
  impl().storage = std::move(storage);
  impl().offset = offset;
}

// ---------------------------------------------------------------- checks

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  HG_CHECK(a.device() == b.device(), "{}: operands on different devices: {} and {}", op,
           a.describe(), b.describe());
}

void check_dtype(const char* op, const char* what, const Tensor& t, DType expected) {
  HG_CHECK(t.dtype() == expected, "{}: {} must be {}, got {}", op, what, dtype_name(expected),
           t.describe());
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  HG_CHECK(a.dtype() == b.dtype(), "{}: operands of different dtypes: {} and {}", op, a.describe(),
           b.describe());
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  HG_CHECK(a.shape() == b.shape(), "{}: operands of different shapes: {} and {}", op, a.describe(),
           b.describe());
}

void check_dim(const char* op, const char* what, const Tensor& t, int64_t dims) {
  HG_CHECK(t.dim() == dims, "{}: {} must have {} dimensions, got {}", op, what, dims, t.describe());
}

}  // namespace hg
