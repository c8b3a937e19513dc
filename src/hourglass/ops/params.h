// Parameters of the ops that take more than tensors.
#pragma once

#include <cstdint>

namespace hg {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};

// Whether a backward computes the gradient with respect to the op's input (the first layer
// of a network needs none).
enum class InputGrad : uint8_t { Skip, Compute };

// Whether a fused batch norm's backward also returns the gradient of the residual its forward
// added (ops::BatchNormBackwardFusion): Compute when the forward had one.
enum class ResidualGrad : uint8_t { Skip, Compute };

// An INT8 convolution's epilogue (ops::conv2d_int8): how the int32 sums of products become the
// output, per output channel k:
//   y = (float(acc) + bias[k]) * multiplier[k]            bias and multiplier: f32 [K] tensors
//   y = y + float(residual) * residual_multiplier          when a residual is given
//   y = max(y, 0)                                          when relu
// then round half to even, saturated to the output's range (u8 [0, 255] with relu, else s8
// [-128, 127]); or, with f32_output, y as it is. With
// x = x_q * sx, w[k] = w_q[k] * sw[k] and an output of scale so, multiplier[k] =
// sx * sw[k] / so and bias[k] = b[k] / (sx * sw[k]) give the real convolution b + x * w;
// residual_multiplier = s_residual / so adds a residual of scale s_residual.
struct Int8ConvParams {
  Conv2dParams conv;
  double residual_multiplier = 0.0;
  bool relu = false;
  bool f32_output = false;  // f32 y instead of u8/s8 (a network's logits)
};

struct SgdOptions {
  double lr = 0.1;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// LARS (You et al. 2017, "Large batch training of convolutional networks") over SGD, as timm's
// Lars: each parameter tensor that takes weight decay steps with the gradient
// (g + weight_decay * w) * trust, where trust = trust_coeff * |w| / (|g| + weight_decay * |w| +
// eps), or 1 when |w| or |g| is 0; with trust_clip (LARC), min(trust / lr, 1).
struct LarsOptions {
  double trust_coeff = 0.001;
  double eps = 1e-8;
  bool trust_clip = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// One step of an image's augmentation program (ops::augment_images): kImageOpWidth floats,
// the kind first, then its parameters. Each kind is torchvision's tensor function of the same
// name on uint8 pixels (torchvision.transforms.functional, 0.14):
//   None          nothing
//   Affine        nearest-neighbour resampling through an inverse affine map, zero outside the
//                 image (F.affine / F.rotate with fill None): parameters 1-6 are the rescaled
//                 matrix of their grid, R00, R10, R20, R01, R11, R21 (data/image_augment.h
//                 builds them); output pixel (x, y) reads the source pixel nearest to
//                 ((gx + 1) W/2 - 1/2, (gy + 1) H/2 - 1/2) with gx = x' R00 + y' R10 + R20,
//                 gy = x' R01 + y' R11 + R21, x' = x - W/2 + 1/2, y' = y - H/2 + 1/2
//   Brightness    blend with black (F.adjust_brightness): parameter 1 the factor f, 2 is 1 - f,
//                 both as f32 (the blends' out = trunc(clamp(f v + (1 - f) u, 0, 255)))
//   Saturation    blend with the image's grayscale (F.adjust_saturation; none on 1 channel)
//   Contrast      blend with the mean of the grayscale (F.adjust_contrast)
//   Sharpness     blend with the 3x3 smoothed image, whose border is the image's own
//                 (F.adjust_sharpness)
//   Posterize     keep the top parameter-1 bits (F.posterize)
//   Solarize      v >= parameter 1 becomes 255 - v (F.solarize)
//   AutoContrast  each channel stretched to [0, 255] (F.autocontrast)
//   Equalize      each channel's histogram equalised (F.equalize)
//   Hue           the hue shifted by parameter 1 in [-0.5, 0.5] (F.adjust_hue; none on 1
//                 channel)
enum class ImageOpKind : int32_t {
  None = 0,
  Affine = 1,
  Brightness = 2,
  Saturation = 3,
  Contrast = 4,
  Sharpness = 5,
  Posterize = 6,
  Solarize = 7,
  AutoContrast = 8,
  Equalize = 9,
  Hue = 10,
};
inline constexpr int32_t kImageOpKinds = 11;
inline constexpr int64_t kImageOpWidth = 8;

// Output spatial size of a convolution or pooling window.
inline int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                             int64_t dilation = 1) {
  return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

}  // namespace hg
