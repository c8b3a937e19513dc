#include "hourglass/backend/cpu/dnnl_util.h"

#include "hourglass/backend/cpu/cpu_features.h"

namespace hg::cpu {

MemoryDesc nhwc_desc(int64_t n, int64_t h, int64_t w, int64_t c, dnnl::memory::data_type dt) {
  return MemoryDesc(dims({n, c, h, w}), dt, dnnl::memory::format_tag::nhwc);
}

dnnl::memory::data_type f32_or_bf16(const char* op, const char* what, const Tensor& t) {
  HG_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16,
           "{}: the cpu backend computes in f32 or bf16, {} is {}", op, what, t.describe());
  return t.dtype() == DType::F32 ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
}

void check_f32(const char* op, const char* what, const Tensor& t) {
  HG_CHECK(t.dtype() == DType::F32, "{}: the cpu backend computes in f32, {} is {}", op, what,
           t.describe());
}

std::string desc_key(const MemoryDesc& md) {
  const dnnl_memory_desc_t& d = md.data;
  std::string key = fmt::format("t{}k{}d", int(d.data_type), int(d.format_kind));
  for (int i = 0; i < d.ndims; ++i) key += fmt::format(",{}", d.dims[i]);
  if (d.format_kind == dnnl_blocked) {
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    key += "s";
    for (int i = 0; i < d.ndims; ++i) key += fmt::format(",{}", b.strides[i]);
    key += "b";
    for (int i = 0; i < b.inner_nblks; ++i)
      key += fmt::format(",{}x{}", b.inner_blks[i], b.inner_idxs[i]);
  }
  key += fmt::format("x{}", int(d.extra.flags));
  return key;
}

void reorder(const dnnl::memory& src, const dnnl::memory& dst) {
  const MemoryDesc src_md = src.get_desc(), dst_md = dst.get_desc();
  auto& prim = PrimitiveCache::instance().get<dnnl::reorder>(
      "reorder:" + desc_key(src_md) + "->" + desc_key(dst_md), [&] {
        return dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src_md, engine(), dst_md));
      });
  execute(prim, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

dnnl::memory in_layout(const dnnl::memory& user, const MemoryDesc& wanted, Tensor& keep_alive) {
  if (user.get_desc() == wanted) return user;
  keep_alive = Tensor::empty({int64_t(wanted.get_size())}, DType::U8);
  dnnl::memory copy(wanted, engine(), keep_alive.data_ptr());
  reorder(user, copy);
  return copy;
}

dnnl::memory memory_for(const MemoryDesc& md, const Tensor& target, bool matches,
                        Tensor& keep_alive) {
  if (matches) return wrap(target, md);
  keep_alive = Tensor::empty({int64_t(md.get_size())}, DType::U8);
  return dnnl::memory(md, engine(), keep_alive.data_ptr());
}

void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args) {
  prim.execute(stream(), args);
  stream().wait();
}

}  // namespace hg::cpu

namespace hg::cpu {

bool has_avx512() {
  static const bool value =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return value;
}

bool has_amx() { return cpu_features().onednn_isa == "avx512_core_amx"; }

}  // namespace hg::cpu
