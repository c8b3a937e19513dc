#include "hourglass/data/image_input.h"

#include <fmt/format.h>

#include "hourglass/base/error.h"
#include "hourglass/data/image_resize.h"

namespace hg::data {

std::vector<float> image_as_model_input(const DecodedImage& image, const ImageTransform& transform,
                                        bool antialias) {
  auto resize = [antialias](const ImageRegion& src, const CropBox& box, int64_t oh, int64_t ow,
                            const CropBox& window, uint8_t* out) {
    if (antialias)
      resize_antialiased(src, box, oh, ow, window, false, out);
    else
      resize_bilinear(src, box, oh, ow, window, false, out);
  };
  const int64_t h = transform.height(), w = transform.width(), c = transform.channels();
  HG_CHECK(c == 1 || c == 3, "the model takes {} channels; images give 1 (luma) or 3 (RGB)", c);
  std::vector<uint8_t> rgb(size_t(h * w * 3));
  const bool as_is = image.image_height == h && image.image_width == w && image.top == 0 &&
                     image.left == 0 && image.height == h && image.width == w;
  if (as_is) {
    rgb = image.pixels;
  } else {
    const CropBox whole{0, 0, image.image_height, image.image_width};
    if (h == w) {
      const EvalGeometry g =
          eval_geometry(image.image_height, image.image_width, eval_resize_for(h), h);
      resize(image.region(), whole, g.resized_height, g.resized_width, g.window, rgb.data());
    } else {
      resize(image.region(), whole, h, w, CropBox{0, 0, h, w}, rgb.data());
    }
  }
  std::vector<uint8_t> pixels;
  if (c == 3) {
    pixels = std::move(rgb);
  } else {
    pixels.resize(size_t(h * w));
    for (size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = uint8_t(
          (19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] + 7471u * rgb[3 * i + 2] + 32768u) >> 16);
  }
  std::vector<float> out(size_t(h * w * c));
  transform.apply(pixels.data(), Augmentation{}, out.data());
  return out;
}

}  // namespace hg::data
