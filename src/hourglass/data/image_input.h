// One image file as a model's input, the way `hourglass predict` feeds models: what the
// evaluation of the model's dataset would have made of it.
#pragma once

#include <vector>

#include "hourglass/data/image_decode.h"
#include "hourglass/data/transforms.h"

namespace hg::data {

// `image` (decoded RGB) as the transform's height x width x channels f32 input: an image of
// exactly that size is taken as it is; a square input is otherwise evaluated as image folders
// are (the shorter side resized to round(size * 256 / 224), then the centre crop), any other
// shape resized to it. Bilinear resizing (image_resize.h), antialiased unless `antialias` is
// false (the run's data.eval_antialias). One channel is the luma PIL's "L"
// conversion gives ((19595 R + 38470 G + 7471 B + 2^15) >> 16); three are the RGB values.
// Then normalised by the transform (its mean and std; no augmentation). Throws InvalidInput
// for a transform of neither 1 nor 3 channels.
std::vector<float> image_as_model_input(const DecodedImage& image, const ImageTransform& transform,
                                        bool antialias = true);

}  // namespace hg::data
