// Helpers shared by the oneDNN-backed CPU kernels (convolution, pooling): memory descriptors
// for hourglass's layouts, cache keys, cached reorders into temporary buffers, and the f32
// check. Everything here runs on the caller's thread; oneDNN itself runs on the OpenMP pool.
#pragma once

#include <dnnl.hpp>

#include <string>

#include "hourglass/backend/cpu/dnnl_context.h"

namespace hg::cpu {

using MemoryDesc = dnnl::memory::desc;

// Activations [N,H,W,C]: oneDNN's logical dims are always {N,C,H,W}; the tag gives the layout.
MemoryDesc nhwc_desc(int64_t n, int64_t h, int64_t w, int64_t c,
                     dnnl::memory::data_type dt = dnnl::memory::data_type::f32);

// For the kernels that compute in f32 only; anything else is the caller's mistake.
void check_f32(const char* op, const char* what, const Tensor& t);

// The oneDNN kernels that also take bf16 (convolution, pooling, matrix products): checks that
// `t` is f32 or bf16 and returns oneDNN's name for its type.
dnnl::memory::data_type f32_or_bf16(const char* op, const char* what, const Tensor& t);

// A short text naming a descriptor's dims, type and layout, for cache keys.
std::string desc_key(const MemoryDesc& md);

// Copies `src` into `dst` (different layouts) with a reorder primitive cached by both
// descriptors.
void reorder(const dnnl::memory& src, const dnnl::memory& dst);

// `user` when it already has layout `wanted`; otherwise a reordered copy in a temporary buffer
// that `keep_alive` owns (it must outlive every use of the returned memory).
dnnl::memory in_layout(const dnnl::memory& user, const MemoryDesc& wanted, Tensor& keep_alive);

// A memory of layout `md` on the engine: over `target`'s data when `target` has exactly that
// layout (`matches`), else over a fresh temporary owned by `keep_alive`.
dnnl::memory memory_for(const MemoryDesc& md, const Tensor& target, bool matches,
                        Tensor& keep_alive);

// Runs `prim` on the stream and waits for it (oneDNN's CPU stream is in-order; the wait makes
// the results visible before the caller reads them).
void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args);

}  // namespace hg::cpu

// Hand-written CPU loops are compiled twice: for the build's baseline ISA and, through this
// attribute, for AVX-512, picked at run time with has_avx512(). A portable build
// (HOURGLASS_NATIVE=OFF, generic x86-64) would otherwise only use SSE2 vectors; in a native
// build both copies are the same.
#define HG_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")))

namespace hg::cpu {
bool has_avx512();
// Whether oneDNN dispatches to AMX (its tile instructions for bf16 and int8 matrix products).
bool has_amx();
}  // namespace hg::cpu
