// The per-pixel arithmetic of ops::augment_images (ImageOpKind, ops/params.h), written once for
// the CPU backend (backend/cpu/augment_images.cpp) and the GPU kernels
// (backend/gpu/augment_images_kernels.cu), in f32 with every product and sum rounded on its
// own, as torchvision's tensor functions compute them (a product then a sum, never fused): the
// CPU and the GPU give the same bits, and the photometric ops give torchvision's.
//
// Compiled by g++, nvcc and hipcc: includes nothing but <cmath>, <cstdint> and
// elementwise_functors.h (HG_HOST_DEVICE).
#pragma once

#include <cmath>
#include <cstdint>

#include "hourglass/backend/elementwise_functors.h"

namespace hg::image_ops {

// a * b rounded once, never fused with a following sum (the host compiler contracts a plain
// product into an fma; fma(a, b, -0) is the product, its sign included).
HG_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fmul_rn(a, b);
#else
  return std::fma(a, b, -0.0f);
#endif
}

HG_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// Round half to even (grid_sample's nearest neighbour).
HG_HOST_DEVICE inline float round_even(float x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return rintf(x);
#else
  return std::nearbyint(x);
#endif
}

// torch's .clamp(0, 255).to(uint8): truncation toward zero.
HG_HOST_DEVICE inline uint8_t to_u8(float x) {
  x = x < 0.0f ? 0.0f : (x > 255.0f ? 255.0f : x);
  return uint8_t(int32_t(x));
}

// _blend(v, u, f): f v + (1 - f) u, each product rounded, then the sum; `rest` is 1 - f.
HG_HOST_DEVICE inline uint8_t blend(float f, float rest, float v, float u) {
  return to_u8(add_rn(mul_rn(f, v), mul_rn(rest, u)));
}

// rgb_to_grayscale: (0.2989 r + 0.587 g + 0.114 b) truncated to uint8.
HG_HOST_DEVICE inline uint8_t grayscale(uint8_t r, uint8_t g, uint8_t b) {
  const float sum =
      add_rn(add_rn(mul_rn(0.2989f, float(r)), mul_rn(0.587f, float(g))), mul_rn(0.114f, float(b)));
  return to_u8(sum);
}

// The source pixel of output pixel (x, y) under an Affine op's rescaled matrix r (its
// parameters 1-6): false where it falls outside the w x h image (the pixel is then 0).
HG_HOST_DEVICE inline bool affine_source(const float* r, int64_t x, int64_t y, int64_t w, int64_t h,
                                         int64_t* sx, int64_t* sy) {
  // The grid's base coordinates, exact halves: x - w/2 + 1/2.
  const float bx = float(x) - 0.5f * float(w) + 0.5f, by = float(y) - 0.5f * float(h) + 0.5f;
  const float gx = add_rn(add_rn(mul_rn(bx, r[0]), mul_rn(by, r[1])), r[2]);
  const float gy = add_rn(add_rn(mul_rn(bx, r[3]), mul_rn(by, r[4])), r[5]);
  // grid_sample's unnormalisation (align_corners = false): (g + 1) * size/2 - 1/2.
  const float ix = round_even(add_rn(mul_rn(add_rn(gx, 1.0f), 0.5f * float(w)), -0.5f));
  const float iy = round_even(add_rn(mul_rn(add_rn(gy, 1.0f), 0.5f * float(h)), -0.5f));
  if (!(ix >= 0.0f && ix <= float(w - 1) && iy >= 0.0f && iy <= float(h - 1))) return false;
  *sx = int64_t(ix);
  *sy = int64_t(iy);
  return true;
}

// F.posterize: v & -(2^(8 - bits)) (bits 0 gives 0).
HG_HOST_DEVICE inline uint8_t posterize(uint8_t v, int32_t bits) {
  bits = bits < 0 ? 0 : (bits > 8 ? 8 : bits);
  return uint8_t(v & uint8_t(-(int32_t(1) << (8 - bits)) & 0xff));
}

// F.solarize: 255 - v where v >= threshold (compared as f32).
HG_HOST_DEVICE inline uint8_t solarize(uint8_t v, float threshold) {
  return float(v) >= threshold ? uint8_t(255 - v) : v;
}

// F.autocontrast of one value of a channel with extremes lo <= hi: (v - lo) * (255 / (hi - lo)),
// truncated; the channel unchanged when lo == hi.
HG_HOST_DEVICE inline uint8_t autocontrast(uint8_t v, int32_t lo, int32_t hi) {
  if (lo == hi) return v;
  return to_u8(mul_rn(float(int32_t(v) - lo), 255.0f / float(hi - lo)));
}

// The sharpness op's smoothed value: the 3x3 kernel [1 1 1; 1 5 1; 1 1 1] / 13 over a pixel's
// neighbourhood whose plain sum (the centre counted once) is `sum9`, rounded to the nearest
// integer (a 13th is never a half, so the integers give torchvision's f32 convolution's result).
HG_HOST_DEVICE inline float smoothed(int32_t sum9, int32_t centre) {
  return float((sum9 + 4 * centre + 6) / 13);
}

// F.equalize's lookup table of one channel from its 256-bin histogram: false when the channel
// stays as it is (its step is 0).
HG_HOST_DEVICE inline bool equalize_lut(const int32_t* hist, uint8_t* lut) {
  int32_t total = 0, last = 0;
  for (int v = 0; v < 256; ++v) {
    total += hist[v];
    if (hist[v] != 0) last = hist[v];
  }
  // The sum of the nonzero bins but the last one, over 255.
  const int32_t step = (total - last) / 255;
  if (step == 0) return false;
  int32_t cumulative = 0;
  for (int v = 0; v < 256; ++v) {
    // lut[v] = (the count below v + step / 2) / step, at most 255.
    const int32_t value = (cumulative + step / 2) / step;
    lut[v] = uint8_t(value > 255 ? 255 : value);
    cumulative += hist[v];
  }
  return true;
}

// torch.remainder(x, 1) for f32: fmod, moved into [0, 1) when negative.
HG_HOST_DEVICE inline float remainder_one(float x) {
  float m = fmodf(x, 1.0f);
  if (m != 0.0f && m < 0.0f) m = add_rn(m, 1.0f);
  return m;
}

HG_HOST_DEVICE inline float clamp01(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

// F.adjust_hue of one RGB pixel (in place): to HSV as _rgb2hsv, the hue shifted by `shift`
// modulo 1, back as _hsv2rgb, then times 255 truncated.
HG_HOST_DEVICE inline void shift_hue(uint8_t* px, float shift) {
  const float r = float(px[0]) / 255.0f, g = float(px[1]) / 255.0f, b = float(px[2]) / 255.0f;
  const float maxc = fmaxf(fmaxf(r, g), b), minc = fminf(fminf(r, g), b);
  const bool eqc = maxc == minc;
  const float cr = add_rn(maxc, -minc);
  const float s = cr / (eqc ? 1.0f : maxc);
  const float divisor = eqc ? 1.0f : cr;
  const float rc = add_rn(maxc, -r) / divisor, gc = add_rn(maxc, -g) / divisor,
              bc = add_rn(maxc, -b) / divisor;
  const float hr = maxc == r ? add_rn(bc, -gc) : 0.0f;
  const float hg = (maxc == g && maxc != r) ? add_rn(add_rn(2.0f, rc), -bc) : 0.0f;
  const float hb = (maxc != g && maxc != r) ? add_rn(add_rn(4.0f, gc), -rc) : 0.0f;
  float h = fmodf(add_rn(add_rn(add_rn(hr, hg), hb) / 6.0f, 1.0f), 1.0f);
  h = remainder_one(add_rn(h, shift));
  // _hsv2rgb
  const float h6 = mul_rn(h, 6.0f);
  const float i_f = floorf(h6);
  const float f = add_rn(h6, -i_f);
  const float v = maxc;
  const float p = clamp01(mul_rn(v, add_rn(1.0f, -s)));
  const float q = clamp01(mul_rn(v, add_rn(1.0f, -mul_rn(s, f))));
  const float t = clamp01(mul_rn(v, add_rn(1.0f, -mul_rn(s, add_rn(1.0f, -f)))));
  int32_t i = int32_t(i_f) % 6;
  if (i < 0) i += 6;
  float out_r, out_g, out_b;
  switch (i) {
    case 0: out_r = v, out_g = t, out_b = p; break;
    case 1: out_r = q, out_g = v, out_b = p; break;
    case 2: out_r = p, out_g = v, out_b = t; break;
    case 3: out_r = p, out_g = q, out_b = v; break;
    case 4: out_r = t, out_g = p, out_b = v; break;
    default: out_r = v, out_g = p, out_b = q; break;
  }
  px[0] = to_u8(mul_rn(out_r, 255.0f));
  px[1] = to_u8(mul_rn(out_g, 255.0f));
  px[2] = to_u8(mul_rn(out_b, 255.0f));
}

}  // namespace hg::image_ops
