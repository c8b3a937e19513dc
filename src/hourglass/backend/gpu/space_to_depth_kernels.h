// Launchers of the space-to-depth kernels (space_to_depth_kernels.cu), which rewrite a
// stride-2 convolution over few input channels (an image network's stem: 7x7 on RGB) as a
// stride-1 convolution over blocks of pixels. conv2d.cpp explains the rewrites; these move the
// operands.
//
// 2x2 blocks, 16 channels each (the forward in f32, and every weight gradient):
//   input   x [n, h, w, c]       -> blocks [n, hb, wb, 16], blocks[b, i, j, (2 ph + pw) * 4 + ch]
//                                    = x[b, 2i + ph - pad_h, 2j + pw - pad_w, ch] (0 outside x
//                                    and for ch >= c)
//   weights [k, r, s, c]         -> [k, (r+1)/2, (s+1)/2, 16], the same (ph, pw, ch) placement
//                                    of w[k, 2a + ph, 2b + pw, ch] (0 past r, s or c)
//   weight gradient [k, r', s', 16] -> [k, r, s, c]: the entries the placement filled, read back
//
// 2x4 blocks, 32 channels each, for a forward that computes two horizontally adjacent output
// pixels as one pixel of 2k channels (the output [n, p, q, k] seen as [n, p, q/2, 2k]):
//   input   x [n, h, w, c]       -> blocks [n, hb, wb, 32], blocks[b, i, j, (4 ph + pw) * 4 + ch]
//                                    = x[b, 2i + ph - pad_h, 4j + pw - pad_w, ch]
//   weights [k, r, s, c]         -> [2k, (r+1)/2, s4, 32] with s4 = space_to_depth_pair_width(s):
//                                    entry (e k + o, a, d, (4 ph + pw) * 4 + ch) holds
//                                    w[o, 2a + ph, 4d + pw - 2e, ch] (0 outside w)
//
// c <= 4 (kSpaceToDepthChannels), every tensor contiguous, one dtype (f32, bf16 or f16); the
// input and the output of a launch do not overlap.
#pragma once

#include <cstdint>

#include "hourglass/base/dtype.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu {

// Input channels a 2x2 block holds per pixel (c padded up to it): 4 pixels x 4 = 16 channels.
inline constexpr int64_t kSpaceToDepthChannels = 4;

// The width in 2x4 blocks of a pair's window: two output pixels 2 columns apart read s + 2
// columns.
inline constexpr int64_t space_to_depth_pair_width(int64_t s) { return (s + 2 + 3) / 4; }

void launch_space_to_depth_input(const void* x, void* blocks, int64_t n, int64_t h, int64_t w,
                                 int64_t c, int64_t hb, int64_t wb, int64_t pad_h, int64_t pad_w,
                                 DType dtype, gpuStream_t stream);
void launch_space_to_depth_pair_input(const void* x, void* blocks, int64_t n, int64_t h, int64_t w,
                                      int64_t c, int64_t hb, int64_t wb, int64_t pad_h,
                                      int64_t pad_w, DType dtype, gpuStream_t stream);
void launch_space_to_depth_pair_weight(const void* w, void* blocks, int64_t k, int64_t r, int64_t s,
                                       int64_t c, DType dtype, gpuStream_t stream);
void launch_space_to_depth_weight(const void* w, void* blocks, int64_t k, int64_t r, int64_t s,
                                  int64_t c, DType dtype, gpuStream_t stream);
void launch_space_to_depth_weight_grad(const void* blocks, void* dw, int64_t k, int64_t r,
                                       int64_t s, int64_t c, DType dtype, gpuStream_t stream);

}  // namespace hg::gpu
