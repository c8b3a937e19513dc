#include "hourglass/backend/cpu/dnnl_context.h"

#include "hourglass/backend/cpu/cpu_backend.h"
#include "hourglass/backend/cpu/cpu_features.h"

namespace hg::cpu {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& md) {
  HG_ASSERT(t.device().is_cpu(), "wrap of non-cpu tensor {}", t.describe());
  return dnnl::memory(md, engine(), t.data_ptr());
}

dnnl::memory::dims dims(std::initializer_list<int64_t> values) {
  return dnnl::memory::dims(values.begin(), values.end());
}

PrimitiveCache& PrimitiveCache::instance() {
  static PrimitiveCache cache;
  return cache;
}

void PrimitiveCache::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
}

size_t PrimitiveCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace hg::cpu

namespace hg {

std::string CpuBackend::compute_dtype_problem(DType dtype) const {
  if (dtype == DType::F16) return "the cpu backend has no f16 kernels";
  if (dtype != DType::BF16) return {};
  // The ISA oneDNN dispatches to (capped by ONEDNN_MAX_CPU_ISA when set).
  const cpu::CpuFeatures& f = cpu::cpu_features();
  if (f.bf16_native) return {};
  return fmt::format(
      "this CPU has neither AVX-512 BF16 nor AMX (oneDNN dispatches to {}), and emulated bf16 "
      "would train slower than f32",
      f.onednn_isa);
}

}  // namespace hg
