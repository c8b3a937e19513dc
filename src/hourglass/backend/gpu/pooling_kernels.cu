// Pooling over NHWC. One thread per output (forward) or input (backward) position and pack of
// V channels (V = 16 bytes of the element type when C allows it, else 1), so neighbouring
// threads touch neighbouring channels and every access is coalesced. Backward passes gather
// over the windows that contain an input position instead of scattering with atomics: each
// dx element is written exactly once, in a fixed order (deterministic, no zero-fill needed).
// Flat indices are 32-bit when they fit (cheaper divisions), 64-bit otherwise.
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "hourglass/backend/gpu/kernel_util.cuh"
#include "hourglass/backend/gpu/pooling_kernels.h"

namespace hg::gpu {

namespace {

constexpr int kThreads = 256;

template <typename T, int V>
__device__ inline void load(const T* p, float (&out)[V]) {
  const Pack<T, V> pk = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_float(pk.v[k]);
}

template <typename T, int V>
__device__ inline void store(T* p, const float (&v)[V]) {
  Pack<T, V> pk;
#pragma unroll
  for (int k = 0; k < V; ++k) pk.v[k] = from_float<T>(v[k]);
  *reinterpret_cast<Pack<T, V>*>(p) = pk;
}

// A flat index over [N, A, B, C / V] split into its coordinates.
template <typename Index>
struct Position {
  int64_t n, a, b, cv;
};

template <typename Index>
__device__ inline Position<Index> split(Index i, Index a, Index b, Index cvs) {
  const Index cv = i % cvs;
  i /= cvs;
  const Index bb = i % b;
  i /= b;
  const Index aa = i % a;
  return {int64_t(i / a), int64_t(aa), int64_t(bb), int64_t(cv)};
}

// Range of outputs o with o * stride - pad <= x <= o * stride - pad + kernel - 1, clipped to
// [0, outputs).
__device__ inline void windows_containing(int64_t x, int64_t kernel, int64_t stride, int64_t pad,
                                          int64_t outputs, int64_t& first, int64_t& last) {
  const int64_t t = x + pad - kernel + 1;
  first = t <= 0 ? 0 : (t + stride - 1) / stride;
  last = (x + pad) / stride;
  if (last > outputs - 1) last = outputs - 1;
}

// The arg-max record of input (h, w), which is window position (r, s): for a u8 workspace the
// position in the window, for an i32 one the position in the image.
template <typename Arg>
__device__ inline Arg arg_of(int64_t h, int64_t w, int64_t r, int64_t s, const PoolGeometry& g) {
  if constexpr (sizeof(Arg) == 1)
    return Arg(r * g.kernel_w + s);
  else
    return Arg(h * g.w + w);
}
template <typename Arg>
inline constexpr Arg kNoArg = sizeof(Arg) == 1 ? Arg(255) : Arg(-1);

template <typename T, int V, typename Index, typename Arg>
__global__ void __launch_bounds__(kThreads)
    max_pool_forward(const T* __restrict__ x, T* __restrict__ y, Arg* __restrict__ argmax,
                     PoolGeometry g, Index total) {
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Position<Index> o = split<Index>(i, Index(g.p), Index(g.q), Index(g.c / V));
    float best[V];
    Arg arg[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      best[k] = -INFINITY;
      arg[k] = kNoArg<Arg>;
    }
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      const int64_t h = o.a * g.stride_h - g.pad_h + r;
      if (h < 0 || h >= g.h) continue;
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        const int64_t w = o.b * g.stride_w - g.pad_w + s;
        if (w < 0 || w >= g.w) continue;
        float v[V];
        load<T, V>(x + ((o.n * g.h + h) * g.w + w) * g.c + o.cv * V, v);
        const Arg pos = arg_of<Arg>(h, w, r, s, g);
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (arg[k] == kNoArg<Arg> || v[k] > best[k]) {  // the first maximum wins ties
            best[k] = v[k];
            arg[k] = pos;
          }
      }
    }
    const int64_t out = ((o.n * g.p + o.a) * g.q + o.b) * g.c + o.cv * V;
    store<T, V>(y + out, best);
    Pack<Arg, V> a;
#pragma unroll
    for (int k = 0; k < V; ++k) a.v[k] = arg[k];
    *reinterpret_cast<Pack<Arg, V>*>(argmax + out) = a;
  }
}

template <typename T, int V, typename Index, typename Arg>
__global__ void __launch_bounds__(kThreads)
    max_pool_backward(const T* __restrict__ dy, const Arg* __restrict__ argmax, T* __restrict__ dx,
                      PoolGeometry g, Index total) {
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Position<Index> in = split<Index>(i, Index(g.h), Index(g.w), Index(g.c / V));
    int64_t p0, p1, q0, q1;
    windows_containing(in.a, g.kernel_h, g.stride_h, g.pad_h, g.p, p0, p1);
    windows_containing(in.b, g.kernel_w, g.stride_w, g.pad_w, g.q, q0, q1);
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    for (int64_t p = p0; p <= p1; ++p)
      for (int64_t q = q0; q <= q1; ++q) {
        const int64_t out = ((in.n * g.p + p) * g.q + q) * g.c + in.cv * V;
        const Pack<Arg, V> a = *reinterpret_cast<const Pack<Arg, V>*>(argmax + out);
        // This input's record in window (p, q).
        const Arg pos = arg_of<Arg>(in.a, in.b, in.a - (p * g.stride_h - g.pad_h),
                                    in.b - (q * g.stride_w - g.pad_w), g);
        float d[V];
        load<T, V>(dy + out, d);
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (a.v[k] == pos) acc[k] += d[k];
      }
    store<T, V>(dx + ((in.n * g.h + in.a) * g.w + in.b) * g.c + in.cv * V, acc);
  }
}

// The backward for stride 2 in both directions (ResNet's 3x3 stem pool): one thread per 2x2
// block of input positions and pack of channels. The block's inputs share their windows (for
// a 3x3 window, 2x2 of them, against 1, 2, 2 and 4 for its four inputs one at a time), so each
// window's dy and arg-max record is read once for four inputs, and the index arithmetic is
// done once. Each input sums the windows whose record names it, in the same order (window rows
// then columns) as max_pool_backward: the same bits.
template <typename T, int V, typename Index, typename Arg>
__global__ void __launch_bounds__(kThreads)
    max_pool_backward_stride2(const T* __restrict__ dy, const Arg* __restrict__ argmax,
                              T* __restrict__ dx, PoolGeometry g, Index total) {
  const Index stride = Index(gridDim.x) * blockDim.x;
  const Index blocks_h = Index((g.h + 1) / 2), blocks_w = Index((g.w + 1) / 2);
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Position<Index> in = split<Index>(i, blocks_h, blocks_w, Index(g.c / V));
    const int64_t h0 = 2 * in.a, w0 = 2 * in.b;
    const int64_t rows = h0 + 1 < g.h ? 2 : 1, cols = w0 + 1 < g.w ? 2 : 1;
    int64_t p0, p1, q0, q1, unused;
    windows_containing(h0, g.kernel_h, 2, g.pad_h, g.p, p0, unused);
    windows_containing(h0 + rows - 1, g.kernel_h, 2, g.pad_h, g.p, unused, p1);
    windows_containing(w0, g.kernel_w, 2, g.pad_w, g.q, q0, unused);
    windows_containing(w0 + cols - 1, g.kernel_w, 2, g.pad_w, g.q, unused, q1);
    float acc[2][2][V];
#pragma unroll
    for (int y = 0; y < 2; ++y)
#pragma unroll
      for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int k = 0; k < V; ++k) acc[y][x][k] = 0.0f;
    for (int64_t p = p0; p <= p1; ++p)
      for (int64_t q = q0; q <= q1; ++q) {
        const int64_t out = ((in.n * g.p + p) * g.q + q) * g.c + in.cv * V;
        const Pack<Arg, V> a = *reinterpret_cast<const Pack<Arg, V>*>(argmax + out);
        float d[V];
        load<T, V>(dy + out, d);
        const int64_t r0 = h0 - (p * 2 - g.pad_h), s0 = w0 - (q * 2 - g.pad_w);
#pragma unroll
        for (int y = 0; y < 2; ++y)
#pragma unroll
          for (int x = 0; x < 2; ++x) {
            const int64_t r = r0 + y, s = s0 + x;  // the input's place in window (p, q)
            if (y >= rows || x >= cols || r < 0 || r >= g.kernel_h || s < 0 || s >= g.kernel_w)
              continue;
            const Arg pos = arg_of<Arg>(h0 + y, w0 + x, r, s, g);
#pragma unroll
            for (int k = 0; k < V; ++k)
              if (a.v[k] == pos) acc[y][x][k] += d[k];
          }
      }
#pragma unroll
    for (int y = 0; y < 2; ++y)
#pragma unroll
      for (int x = 0; x < 2; ++x)
        if (y < rows && x < cols)
          store<T, V>(dx + ((in.n * g.h + h0 + y) * g.w + w0 + x) * g.c + in.cv * V, acc[y][x]);
  }
}

// ResNet's stem pool (3x3 windows, stride 2, padding 1, a u8 record, every offset below 2^31):
// the kernels above with the window's shape fixed and 32-bit offsets. Those spend their time
// on instructions, not memory (Nsight Compute on the H200, ResNet-50's stem: 76% of the
// multiprocessors' issue rate, 1.6 and 1.1 TB/s, most of it 64-bit index arithmetic and
// window loops); these compute each offset once and test each edge once. The same values,
// records and sums in the same order as max_pool_forward and max_pool_backward_stride2.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    max_pool_forward_3x3s2(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ argmax,
                           int h, int w, int c, int p, int q, int total) {
  const int vectors = c / V;
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < total;
       i += int(gridDim.x * blockDim.x)) {
    const int cv = i % vectors;
    int t = i / vectors;
    const int b = t % q;
    t /= q;
    const int a = t % p, n = t / p;
    const int top = 2 * a - 1, left = 2 * b - 1;  // the window's first row and column
    const bool rows[3] = {top >= 0, true, top + 2 < h};
    const bool cols[3] = {left >= 0, true, left + 2 < w};
    const int base = ((n * h + top) * w + left) * c + cv * V;  // row 0, column 0 (maybe outside)
    Pack<T, V> v[3][3];
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
      for (int s = 0; s < 3; ++s)
        if (rows[r] && cols[s])
          v[r][s] = *reinterpret_cast<const Pack<T, V>*>(x + base + (r * w + s) * c);
    float best[V];
    Pack<uint8_t, V> arg;
#pragma unroll
    for (int k = 0; k < V; ++k) best[k] = 0.0f, arg.v[k] = 0;  // set at the first position
    bool have = false;  // the first position inside the image sets the maximum
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
      for (int s = 0; s < 3; ++s)
        if (rows[r] && cols[s]) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const float f = to_float(v[r][s].v[k]);
            if (!have || f > best[k]) {  // the first maximum wins ties
              best[k] = f;
              arg.v[k] = uint8_t(r * 3 + s);
            }
          }
          have = true;
        }
    const int out = i * V;  // [n, a, b, cv * V] flattened
    store<T, V>(y + out, best);
    *reinterpret_cast<Pack<uint8_t, V>*>(argmax + out) = arg;
  }
}

// 0xff in each byte of `records` that equals `value`, 0 in the others (a zero-byte test of
// records ^ value: the high bit of (x & 0x7f) + 0x7f, or of x itself, is set when x is not 0).
__device__ inline uint32_t bytes_equal(uint32_t records, uint32_t value) {
  const uint32_t x = records ^ (value * 0x01010101u);
  const uint32_t nonzero = (((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u;
  return ((nonzero ^ 0x80808080u) >> 7) * 0xffu;
}

// Eight 2-byte gradients and their records, as words: acc[k] += dy[k] where record k equals
// `value`, += +0 elsewhere. The masks keep the unwanted values (NaN included) out, and adding
// +0 leaves a sum that started at +0 unchanged, so the sums equal those of the per-channel tests.
template <typename T>
__device__ inline void add_where(float (&acc)[8], const uint4& dy, const uint2& records,
                                 uint32_t value) {
  static_assert(sizeof(T) == 2);
  const uint32_t m0 = bytes_equal(records.x, value), m1 = bytes_equal(records.y, value);
  // Byte j of a record word masks channel j; __byte_perm widens bytes (0, 1) and (2, 3) into
  // the two 16-bit halves of a gradient word.
  const uint32_t words[4] = {dy.x & __byte_perm(m0, 0, 0x1100), dy.y & __byte_perm(m0, 0, 0x3322),
                             dy.z & __byte_perm(m1, 0, 0x1100), dy.w & __byte_perm(m1, 0, 0x3322)};
  Pack<T, 8> pk;
  memcpy(&pk, words, sizeof(words));
#pragma unroll
  for (int k = 0; k < 8; ++k) acc[k] += to_float(pk.v[k]);
}

// One thread per 2x2 block of inputs (2a..2a+1, 2b..2b+1) and pack of channels. Input row 2a
// lies only in window row a (its middle row); row 2a+1 in window rows a (last row) and a + 1
// (first row); columns likewise. Window (a, b) always exists; a + 1 and b + 1 may be past the
// output's edge. Eight 2-byte channels (bf16, f16) go through add_where's word masks: Nsight
// Compute showed the per-channel byte tests issue-bound (95 registers, the ALU pipe 73% busy,
// about 800 instructions a thread); other packs test channel by channel.
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    max_pool_backward_3x3s2(const T* __restrict__ dy, const uint8_t* __restrict__ argmax,
                            T* __restrict__ dx, int h, int w, int c, int p, int q, int total) {
  const int vectors = c / V;
  const int blocks_w = (w + 1) / 2, blocks_h = (h + 1) / 2;
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < total;
       i += int(gridDim.x * blockDim.x)) {
    const int cv = i % vectors;
    int t = i / vectors;
    const int b = t % blocks_w;
    t /= blocks_w;
    const int a = t % blocks_h, n = t / blocks_h;
    const bool down = a + 1 < p, right = b + 1 < q;  // windows (a + 1, .), (., b + 1)
    const bool second_row = 2 * a + 1 < h, second_col = 2 * b + 1 < w;
    const int win = ((n * p + a) * q + b) * c + cv * V;  // window (a, b)
    const int win_right = win + c, win_down = win + q * c, win_diag = win_down + c;
    const int x00 = ((n * h + 2 * a) * w + 2 * b) * c + cv * V;  // input (2a, 2b)
    if constexpr (sizeof(T) == 2 && V == 8) {
      // A missing window reads as zero gradients, which add nothing.
      const uint4 d00 = *reinterpret_cast<const uint4*>(dy + win);
      const uint2 a00 = *reinterpret_cast<const uint2*>(argmax + win);
      uint4 d01{}, d10{}, d11{};
      uint2 a01{}, a10{}, a11{};
      if (right) {
        d01 = *reinterpret_cast<const uint4*>(dy + win_right);
        a01 = *reinterpret_cast<const uint2*>(argmax + win_right);
      }
      if (down) {
        d10 = *reinterpret_cast<const uint4*>(dy + win_down);
        a10 = *reinterpret_cast<const uint2*>(argmax + win_down);
      }
      if (down && right) {
        d11 = *reinterpret_cast<const uint4*>(dy + win_diag);
        a11 = *reinterpret_cast<const uint2*>(argmax + win_diag);
      }
      float acc[8];
      // Input (2a, 2b): window (a, b) at (1, 1).
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] = 0.0f;
      add_where<T>(acc, d00, a00, 4);
      store<T, 8>(dx + x00, acc);
      if (second_col) {  // input (2a, 2b + 1): (a, b) at (1, 2), (a, b + 1) at (1, 0)
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[k] = 0.0f;
        add_where<T>(acc, d00, a00, 5);
        add_where<T>(acc, d01, a01, 3);
        store<T, 8>(dx + x00 + c, acc);
      }
      if (!second_row) continue;
        // Input (2a + 1, 2b): (a, b) at (2, 1), (a + 1, b) at (0, 1).
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] = 0.0f;
      add_where<T>(acc, d00, a00, 7);
      add_where<T>(acc, d10, a10, 1);
      store<T, 8>(dx + x00 + w * c, acc);
      if (second_col) {  // input (2a + 1, 2b + 1): the four windows' corners
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[k] = 0.0f;
        add_where<T>(acc, d00, a00, 8);
        add_where<T>(acc, d01, a01, 6);
        add_where<T>(acc, d10, a10, 2);
        add_where<T>(acc, d11, a11, 0);
        store<T, 8>(dx + x00 + w * c + c, acc);
      }
      continue;
    }
    using Arg = Pack<uint8_t, V>;
    const Arg a00 = *reinterpret_cast<const Arg*>(argmax + win);
    float d00[V], d01[V] = {}, d10[V] = {}, d11[V] = {};
    Arg a01{}, a10{}, a11{};
    load<T, V>(dy + win, d00);
    if (right) {
      a01 = *reinterpret_cast<const Arg*>(argmax + win_right);
      load<T, V>(dy + win_right, d01);
    }
    if (down) {
      a10 = *reinterpret_cast<const Arg*>(argmax + win_down);
      load<T, V>(dy + win_down, d10);
    }
    if (down && right) {
      a11 = *reinterpret_cast<const Arg*>(argmax + win_diag);
      load<T, V>(dy + win_diag, d11);
    }
    float acc[V];
    // Input (2a, 2b): window (a, b) at (1, 1).
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = a00.v[k] == 4 ? 0.0f + d00[k] : 0.0f;
    store<T, V>(dx + x00, acc);
    if (second_col) {  // input (2a, 2b + 1): (a, b) at (1, 2), (a, b + 1) at (1, 0)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        acc[k] = a00.v[k] == 5 ? 0.0f + d00[k] : 0.0f;
        if (right && a01.v[k] == 3) acc[k] += d01[k];
      }
      store<T, V>(dx + x00 + c, acc);
    }
    if (!second_row) continue;
      // Input (2a + 1, 2b): (a, b) at (2, 1), (a + 1, b) at (0, 1).
#pragma unroll
    for (int k = 0; k < V; ++k) {
      acc[k] = a00.v[k] == 7 ? 0.0f + d00[k] : 0.0f;
      if (down && a10.v[k] == 1) acc[k] += d10[k];
    }
    store<T, V>(dx + x00 + w * c, acc);
    if (second_col) {  // input (2a + 1, 2b + 1): the four windows' corners
#pragma unroll
      for (int k = 0; k < V; ++k) {
        acc[k] = a00.v[k] == 8 ? 0.0f + d00[k] : 0.0f;
        if (right && a01.v[k] == 6) acc[k] += d01[k];
        if (down && a10.v[k] == 2) acc[k] += d10[k];
        if (down && right && a11.v[k] == 0) acc[k] += d11[k];
      }
      store<T, V>(dx + x00 + w * c + c, acc);
    }
  }
}

// Whether the 3x3, stride-2, padding-1 kernels above take `g` with its record in `arg_bytes`.
bool stem_pool(const PoolGeometry& g, size_t arg_bytes) {
  const int64_t input = g.n * g.h * g.w * g.c, output = g.n * g.p * g.q * g.c;
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 2 && g.stride_w == 2 && g.pad_h == 1 &&
         g.pad_w == 1 && arg_bytes == 1 && input < (int64_t(1) << 31) &&
         output < (int64_t(1) << 31);
}

template <typename T, int V, typename Index>
__global__ void __launch_bounds__(kThreads)
    avg_pool_forward(const T* __restrict__ x, T* __restrict__ y, PoolGeometry g, Index total) {
  const float divisor = float(g.kernel_h * g.kernel_w);
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Position<Index> o = split<Index>(i, Index(g.p), Index(g.q), Index(g.c / V));
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    for (int64_t r = 0; r < g.kernel_h; ++r) {
      const int64_t h = o.a * g.stride_h - g.pad_h + r;
      if (h < 0 || h >= g.h) continue;
      for (int64_t s = 0; s < g.kernel_w; ++s) {
        const int64_t w = o.b * g.stride_w - g.pad_w + s;
        if (w < 0 || w >= g.w) continue;
        float v[V];
        load<T, V>(x + ((o.n * g.h + h) * g.w + w) * g.c + o.cv * V, v);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += v[k];
      }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] /= divisor;
    store<T, V>(y + ((o.n * g.p + o.a) * g.q + o.b) * g.c + o.cv * V, acc);
  }
}

template <typename T, int V, typename Index>
__global__ void __launch_bounds__(kThreads)
    avg_pool_backward(const T* __restrict__ dy, T* __restrict__ dx, PoolGeometry g, Index total) {
  const float divisor = float(g.kernel_h * g.kernel_w);
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Position<Index> in = split<Index>(i, Index(g.h), Index(g.w), Index(g.c / V));
    int64_t p0, p1, q0, q1;
    windows_containing(in.a, g.kernel_h, g.stride_h, g.pad_h, g.p, p0, p1);
    windows_containing(in.b, g.kernel_w, g.stride_w, g.pad_w, g.q, q0, q1);
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    for (int64_t p = p0; p <= p1; ++p)
      for (int64_t q = q0; q <= q1; ++q) {
        float d[V];
        load<T, V>(dy + ((in.n * g.p + p) * g.q + q) * g.c + in.cv * V, d);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += d[k];
      }
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] /= divisor;
    store<T, V>(dx + ((in.n * g.h + in.a) * g.w + in.b) * g.c + in.cv * V, acc);
  }
}

// Global average pooling: block (kGapX, kGapY) for one image and kGapX channel packs; the
// kGapY rows of threads split the hw positions, then add their partial sums in row order.
constexpr int kGapX = 64, kGapY = 4;

template <typename T, int V>
__global__ void __launch_bounds__(kGapX* kGapY)
    global_avg_pool_forward(const T* __restrict__ x, T* __restrict__ y, int64_t hw, int64_t c) {
  __shared__ float partial[kGapY][V][kGapX];
  const int64_t n = blockIdx.x;
  const int64_t cv = int64_t(blockIdx.y) * kGapX + threadIdx.x;
  const bool active = cv < c / V;
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.0f;
  if (active)
    for (int64_t r = threadIdx.y; r < hw; r += kGapY) {
      float v[V];
      load<T, V>(x + (n * hw + r) * c + cv * V, v);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += v[k];
    }
#pragma unroll
  for (int k = 0; k < V; ++k) partial[threadIdx.y][k][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || !active) return;
  const float count = float(hw);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float s = partial[0][k][threadIdx.x];
#pragma unroll
    for (int r = 1; r < kGapY; ++r) s += partial[r][k][threadIdx.x];
    acc[k] = s / count;
  }
  store<T, V>(y + n * c + cv * V, acc);
}

template <typename T, int V, typename Index>
__global__ void __launch_bounds__(kThreads)
    global_avg_pool_backward(const T* __restrict__ dy, T* __restrict__ dx, Index hw, Index c,
                             Index total) {
  const float count = float(hw);
  const Index cvs = c / Index(V);
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const Index cv = i % cvs, row = i / cvs;  // row = n * hw + position
    const Index n = row / hw;
    float d[V];
    load<T, V>(dy + int64_t(n) * c + int64_t(cv) * V, d);
#pragma unroll
    for (int k = 0; k < V; ++k) d[k] /= count;
    store<T, V>(dx + int64_t(row) * c + int64_t(cv) * V, d);
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Calls f.template operator()<V, Index>() with V the 16-byte pack of T when C and every
// pointer allow it (else 1) and Index 32-bit when every flat index fits (else 64-bit).
template <typename T, typename F>
void with_pack_and_index(int64_t c, std::initializer_list<const void*> pointers, const void* argmax,
                         size_t arg_bytes, int64_t largest, F&& f) {
  constexpr int VP = int(16 / sizeof(T));
  bool vec = c % VP == 0 && (argmax == nullptr || aligned(argmax, arg_bytes * VP));
  for (const void* p : pointers) vec = vec && aligned(p, 16);
  const bool small = largest < (int64_t(1) << 31);
  if (vec) {
    if (small)
      f.template operator()<VP, uint32_t>();
    else
      f.template operator()<VP, int64_t>();
  } else {
    if (small)
      f.template operator()<1, uint32_t>();
    else
      f.template operator()<1, int64_t>();
  }
}

int64_t input_size(const PoolGeometry& g) { return g.n * g.h * g.w * g.c; }
int64_t output_size(const PoolGeometry& g) { return g.n * g.p * g.q * g.c; }
int64_t largest(const PoolGeometry& g) {
  const int64_t a = input_size(g), b = output_size(g);
  return a > b ? a : b;
}

}  // namespace

DType max_pool_workspace_dtype(const PoolGeometry& g) {
  return g.kernel_h * g.kernel_w <= kMaxPoolU8Window ? DType::U8 : DType::I32;
}

namespace {

// Calls f.template operator()<Arg>() with the workspace's element type for `g`.
template <typename F>
void with_arg_type(const PoolGeometry& g, F&& f) {
  if (max_pool_workspace_dtype(g) == DType::U8)
    f.template operator()<uint8_t>();
  else
    f.template operator()<int32_t>();
}

}  // namespace

void launch_max_pool(const void* x, void* y, void* argmax, const PoolGeometry& g, DType dtype,
                     gpuStream_t stream) {
  if (output_size(g) == 0) return;
  dispatch_float("max_pool2d", dtype, [&]<typename T>() {
    with_arg_type(g, [&]<typename Arg>() {
      with_pack_and_index<T>(
          g.c, {x, y}, argmax, sizeof(Arg), largest(g), [&]<int V, typename Index>() {
            const int64_t total = output_size(g) / V;
            if constexpr (sizeof(Arg) == 1) {
              if (stem_pool(g, sizeof(Arg))) {
                max_pool_forward_3x3s2<T, V><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
                    static_cast<const T*>(x), static_cast<T*>(y), static_cast<uint8_t*>(argmax),
                    int(g.h), int(g.w), int(g.c), int(g.p), int(g.q), int(total));
                return;
              }
            }
            max_pool_forward<T, V, Index, Arg><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
                static_cast<const T*>(x), static_cast<T*>(y), static_cast<Arg*>(argmax), g,
                Index(total));
          });
    });
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_max_pool_backward(const void* dy, const void* argmax, void* dx, const PoolGeometry& g,
                              DType dtype, gpuStream_t stream) {
  if (input_size(g) == 0) return;
  dispatch_float("max_pool2d_backward", dtype, [&]<typename T>() {
    with_arg_type(g, [&]<typename Arg>() {
      with_pack_and_index<T>(
          g.c, {dy, dx}, argmax, sizeof(Arg), largest(g), [&]<int V, typename Index>() {
            if (g.stride_h == 2 && g.stride_w == 2) {
              const int64_t total = g.n * ((g.h + 1) / 2) * ((g.w + 1) / 2) * (g.c / V);
              if constexpr (sizeof(Arg) == 1) {
                if (stem_pool(g, sizeof(Arg))) {
                  max_pool_backward_3x3s2<T, V><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
                      static_cast<const T*>(dy), static_cast<const uint8_t*>(argmax),
                      static_cast<T*>(dx), int(g.h), int(g.w), int(g.c), int(g.p), int(g.q),
                      int(total));
                  return;
                }
              }
              max_pool_backward_stride2<T, V, Index, Arg>
                  <<<grid_for(total, kThreads), kThreads, 0, stream>>>(
                      static_cast<const T*>(dy), static_cast<const Arg*>(argmax),
                      static_cast<T*>(dx), g, Index(total));
              return;
            }
            const int64_t total = input_size(g) / V;
            max_pool_backward<T, V, Index, Arg><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
                static_cast<const T*>(dy), static_cast<const Arg*>(argmax), static_cast<T*>(dx), g,
                Index(total));
          });
    });
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_avg_pool(const void* x, void* y, const PoolGeometry& g, DType dtype,
                     gpuStream_t stream) {
  if (output_size(g) == 0) return;
  dispatch_float("avg_pool2d", dtype, [&]<typename T>() {
    with_pack_and_index<T>(g.c, {x, y}, nullptr, 0, largest(g), [&]<int V, typename Index>() {
      const int64_t total = output_size(g) / V;
      avg_pool_forward<T, V, Index><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), g, Index(total));
    });
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_avg_pool_backward(const void* dy, void* dx, const PoolGeometry& g, DType dtype,
                              gpuStream_t stream) {
  if (input_size(g) == 0) return;
  dispatch_float("avg_pool2d_backward", dtype, [&]<typename T>() {
    with_pack_and_index<T>(g.c, {dy, dx}, nullptr, 0, largest(g), [&]<int V, typename Index>() {
      const int64_t total = input_size(g) / V;
      avg_pool_backward<T, V, Index><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
          static_cast<const T*>(dy), static_cast<T*>(dx), g, Index(total));
    });
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_global_avg_pool(const void* x, void* y, int64_t n, int64_t hw, int64_t c, DType dtype,
                            gpuStream_t stream) {
  if (n * c == 0) return;
  dispatch_float("global_avg_pool", dtype, [&]<typename T>() {
    // An empty map (hw = 0) is 0 / 0 = NaN per channel, as a mean of nothing.
    with_pack_and_index<T>(c, {x, y}, nullptr, 0, n * hw * c, [&]<int V, typename Index>() {
      const dim3 grid(unsigned(n), unsigned((c / V + kGapX - 1) / kGapX));
      global_avg_pool_forward<T, V><<<grid, dim3(kGapX, kGapY), 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), hw, c);
    });
  });
  HG_GPU_CHECK_LAUNCH();
}

void launch_global_avg_pool_backward(const void* dy, void* dx, int64_t n, int64_t hw, int64_t c,
                                     DType dtype, gpuStream_t stream) {
  if (n * hw * c == 0) return;
  dispatch_float("global_avg_pool_backward", dtype, [&]<typename T>() {
    with_pack_and_index<T>(c, {dy, dx}, nullptr, 0, n * hw * c, [&]<int V, typename Index>() {
      const int64_t total = n * hw * c / V;
      global_avg_pool_backward<T, V, Index><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
          static_cast<const T*>(dy), static_cast<T*>(dx), Index(hw), Index(c), Index(total));
    });
  });
  HG_GPU_CHECK_LAUNCH();
}

}  // namespace hg::gpu
