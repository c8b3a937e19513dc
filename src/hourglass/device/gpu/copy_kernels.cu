// Copy (with dtype conversion and any strides) and fill kernels for tensors in GPU memory.
//
// Conversions reproduce the CPU's (tensor.cpp: load to double, store with C casts and the
// round-to-nearest-even f16/bf16 conversions of base/half.h) exactly. They go through float
// when both dtypes are exact in float (f32, f16, bf16, i8, u8) - the result is identical and
// float is fast on every GPU - and through double otherwise (f64, i32, i64). i8/u8 are stored
// through int32 as x86 does, so even out-of-range values wrap like on the CPU.
#include <type_traits>

#include "hourglass/device/gpu/copy_kernels.h"
#include "hourglass/device/gpu/kernel_types.cuh"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

// ---- element conversions through the compute type C (float or double)

template <typename T>
struct Elem {
  template <typename C>
  __device__ static C load(T v) {
    return C(v);
  }
  template <typename C>
  __device__ static T store(C v) {
    return T(v);
  }
};
template <>
struct Elem<bf16> {
  template <typename C>
  __device__ static C load(bf16 v) {
    return C(to_float(v));
  }
  template <typename C>
  __device__ static bf16 store(C v) {
    return from_float<bf16>(float(v));
  }
};
template <>
struct Elem<f16> {
  template <typename C>
  __device__ static C load(f16 v) {
    return C(to_float(v));
  }
  template <typename C>
  __device__ static f16 store(C v) {
    return from_float<f16>(float(v));
  }
};
template <>
struct Elem<int8_t> {
  template <typename C>
  __device__ static C load(int8_t v) {
    return C(v);
  }
  template <typename C>
  __device__ static int8_t store(C v) {
    return int8_t(int32_t(v));
  }
};
template <>
struct Elem<uint8_t> {
  template <typename C>
  __device__ static C load(uint8_t v) {
    return C(v);
  }
  template <typename C>
  __device__ static uint8_t store(C v) {
    return uint8_t(int32_t(v));
  }
};

template <typename T>
inline constexpr bool kExactInFloat =
    std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16> ||
    std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>;

template <typename D, typename S>
__device__ inline D convert(S v) {
  using C = std::conditional_t<kExactInFloat<D> && kExactInFloat<S>, float, double>;
  return Elem<D>::template store<C>(Elem<S>::template load<C>(v));
}

// ---- strided walks: linear index -> element offsets on both sides

template <typename I>
struct Walk {
  int ndim;
  I shape[kMaxCopyDims];
  I dst[kMaxCopyDims];
  I src[kMaxCopyDims];
};

template <typename I>
__device__ inline void offsets(const Walk<I>& w, I linear, I& dst, I& src) {
  dst = 0;
  src = 0;
  for (int d = w.ndim - 1; d >= 0; --d) {
    const I size = w.shape[d];
    const I idx = linear % size;
    linear /= size;
    dst += idx * w.dst[d];
    src += idx * w.src[d];
  }
}

// ---- kernels

// Contiguous conversion: each block covers kUnroll * blockDim consecutive elements per pass,
// loads first (kUnroll in flight per thread), then converts and stores; coalesced both sides.
template <typename D, typename S>
__global__ void __launch_bounds__(kThreads)
    convert_contiguous(D* __restrict__ dst, const S* __restrict__ src, int64_t n) {
  const int64_t tile = int64_t(blockDim.x) * kUnroll;
  for (int64_t start = int64_t(blockIdx.x) * tile; start < n; start += int64_t(gridDim.x) * tile) {
    S v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = start + threadIdx.x + int64_t(u) * blockDim.x;
      if (i < n) v[u] = src[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = start + threadIdx.x + int64_t(u) * blockDim.x;
      if (i < n) dst[i] = convert<D>(v[u]);
    }
  }
}

template <typename D, typename S, typename I>
__global__ void __launch_bounds__(kThreads)
    convert_strided(D* __restrict__ dst, const S* __restrict__ src, Walk<I> w, I n) {
  const I step = I(gridDim.x) * blockDim.x;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    I d, s;
    offsets(w, i, d, s);
    dst[d] = convert<D>(src[s]);
  }
}

// Same dtype, any strides: words of the element's size are moved unchanged (NaN payloads too).
template <typename W, typename I>
__global__ void __launch_bounds__(kThreads)
    copy_strided(W* __restrict__ dst, const W* __restrict__ src, Walk<I> w, I n) {
  const I step = I(gridDim.x) * blockDim.x;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    I d, s;
    offsets(w, i, d, s);
    dst[d] = src[s];
  }
}

// Contiguous fill: `head` single elements up to the first 16-byte boundary, then 16-byte
// stores of the replicated pattern, then the tail (fewer than 16 bytes) as single elements.
template <typename W>
__global__ void __launch_bounds__(kThreads)
    fill_contiguous(W* __restrict__ p, int64_t n, W value, uint4 value16, int64_t head,
                    int64_t vectors) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  uint4* v = reinterpret_cast<uint4*>(p + head);
  for (int64_t i = tid; i < vectors; i += step) v[i] = value16;
  const int64_t tail = head + vectors * int64_t(16 / sizeof(W));
  if (tid < head) p[tid] = value;
  if (tid < n - tail) p[tail + tid] = value;
}

template <typename W, typename I>
__global__ void __launch_bounds__(kThreads)
    fill_strided(W* __restrict__ p, W value, Walk<I> w, I n) {
  const I step = I(gridDim.x) * blockDim.x;
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    I d, s;
    offsets(w, i, d, s);
    p[d] = value;
  }
}

// ---- host side

template <typename Body>
void with_dtype(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::F32: return body.template operator()<float>();
    case DType::F64: return body.template operator()<double>();
    case DType::F16: return body.template operator()<f16>();
    case DType::BF16: return body.template operator()<bf16>();
    case DType::I8: return body.template operator()<int8_t>();
    case DType::I32: return body.template operator()<int32_t>();
    case DType::I64: return body.template operator()<int64_t>();
    case DType::U8: return body.template operator()<uint8_t>();
  }
  unsupported_dtype("copy", dtype);
}

template <typename Body>
void with_word(size_t itemsize, Body&& body) {
  switch (itemsize) {
    case 1: return body.template operator()<uint8_t>();
    case 2: return body.template operator()<uint16_t>();
    case 4: return body.template operator()<uint32_t>();
    case 8: return body.template operator()<uint64_t>();
  }
  unsupported_dtype("copy (element size)", DType::U8);
}

// 32-bit index arithmetic (several times cheaper than 64-bit division on GPUs) when every
// index and offset fits.
bool fits_32bit(const CopyLayout& l, int64_t n) {
  constexpr int64_t kMax = int64_t(1) << 31;
  if (n >= kMax) return false;
  int64_t dst_end = 0, src_end = 0;
  for (int d = 0; d < l.ndim; ++d) {
    if (l.dst_strides[d] < 0 || l.src_strides[d] < 0) return false;
    dst_end += (l.shape[d] - 1) * l.dst_strides[d];
    src_end += (l.shape[d] - 1) * l.src_strides[d];
  }
  return dst_end < kMax && src_end < kMax;
}

template <typename I>
Walk<I> make_walk(const CopyLayout& l) {
  Walk<I> w{};
  w.ndim = l.ndim;
  for (int d = 0; d < l.ndim; ++d) {
    w.shape[d] = I(l.shape[d]);
    w.dst[d] = I(l.dst_strides[d]);
    w.src[d] = I(l.src_strides[d]);
  }
  return w;
}

// Calls body.template operator()<I>(walk, n) with I = uint32_t when it fits, else int64_t.
template <typename Body>
void with_walk(const CopyLayout& l, int64_t n, Body&& body) {
  if (fits_32bit(l, n))
    body.template operator()<uint32_t>(make_walk<uint32_t>(l), uint32_t(n));
  else
    body.template operator()<int64_t>(make_walk<int64_t>(l), n);
}

bool is_contiguous(const CopyLayout& l) {
  return l.ndim == 1 && l.dst_strides[0] == 1 && l.src_strides[0] == 1;
}

}  // namespace

void launch_copy(void* dst, DType dst_dtype, const void* src, DType src_dtype,
                 const CopyLayout& layout, gpuStream_t stream) {
  const int64_t n = layout.numel();
  if (n == 0) return;
  const bool contiguous = is_contiguous(layout);
  if (dst_dtype == src_dtype) {
    const size_t item = dtype_size(dst_dtype);
    if (contiguous) {
      HG_GPU_CHECK(gpuMemcpyAsync(dst, src, size_t(n) * item, gpuMemcpyDeviceToDevice, stream));
      return;
    }
    with_word(item, [&]<typename W>() {
      with_walk(layout, n, [&]<typename I>(const Walk<I>& w, I count) {
        copy_strided<W, I><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
            static_cast<W*>(dst), static_cast<const W*>(src), w, count);
        HG_GPU_CHECK_LAUNCH();
      });
    });
    return;
  }
  with_dtype(dst_dtype, [&]<typename D>() {
    with_dtype(src_dtype, [&]<typename S>() {
      if constexpr (!std::is_same_v<D, S>) {
        D* d = static_cast<D*>(dst);
        const S* s = static_cast<const S*>(src);
        if (contiguous) {
          convert_contiguous<D, S>
              <<<grid_for((n + kUnroll - 1) / kUnroll, kThreads), kThreads, 0, stream>>>(d, s, n);
          HG_GPU_CHECK_LAUNCH();
          return;
        }
        with_walk(layout, n, [&]<typename I>(const Walk<I>& w, I count) {
          convert_strided<D, S, I><<<grid_for(n, kThreads), kThreads, 0, stream>>>(d, s, w, count);
          HG_GPU_CHECK_LAUNCH();
        });
      }
    });
  });
}

void launch_fill(void* dst, size_t itemsize, uint64_t pattern, const CopyLayout& layout,
                 gpuStream_t stream) {
  const int64_t n = layout.numel();
  if (n == 0) return;
  with_word(itemsize, [&]<typename W>() {
    const W value = W(pattern);
    W* p = static_cast<W*>(dst);
    if (layout.ndim == 1 && layout.dst_strides[0] == 1) {
      // The 16 bytes of the pattern repeated.
      uint64_t word = 0;
      for (size_t b = 0; b < 8; b += sizeof(W)) word |= uint64_t(value) << (8 * b);
      const uint4 value16{uint32_t(word), uint32_t(word >> 32), uint32_t(word),
                          uint32_t(word >> 32)};
      const uintptr_t address = reinterpret_cast<uintptr_t>(p);
      int64_t head = int64_t((16 - address % 16) % 16 / sizeof(W));
      if (head > n) head = n;
      const int64_t vectors = (n - head) / int64_t(16 / sizeof(W));
      const int64_t work = vectors > 16 ? vectors : 16;  // head and tail need 16 threads
      fill_contiguous<W>
          <<<grid_for(work, kThreads), kThreads, 0, stream>>>(p, n, value, value16, head, vectors);
      HG_GPU_CHECK_LAUNCH();
      return;
    }
    CopyLayout l = layout;
    for (int d = 0; d < l.ndim; ++d) l.src_strides[d] = 0;
    with_walk(l, n, [&]<typename I>(const Walk<I>& w, I count) {
      fill_strided<W, I><<<grid_for(n, kThreads), kThreads, 0, stream>>>(p, value, w, count);
      HG_GPU_CHECK_LAUNCH();
    });
  });
}

}  // namespace hg::gpu
