#include "hourglass/data/image_files.h"

#include "hourglass/base/untrusted_text.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/data/image_decode.h"

namespace hg::data {

namespace {

constexpr int64_t kMinImageSize = 8, kMaxImageSize = 4096;

const std::shared_ptr<const EncodedImages>& checked(const std::shared_ptr<const EncodedImages>& p,
                                                    const ImageFileOptions& o) {
  HG_CHECK(p != nullptr, "image dataset '{}': no images given (null)", o.name);
  HG_CHECK(p->size() > 0, "image dataset '{}': {} holds no images", o.name, p->source());
  HG_CHECK(o.image_size >= kMinImageSize && o.image_size <= kMaxImageSize,
           "image dataset '{}': image_size must be in [{}, {}], got {}", o.name, kMinImageSize,
           kMaxImageSize, o.image_size);
  HG_CHECK(o.limit >= 0, "image dataset '{}': limit must be >= 0, got {}", o.name, o.limit);
  const ImageSizeRamp& r = o.ramp;
  if (r.enabled())
    HG_CHECK(r.start_size >= kMinImageSize && r.start_size <= o.image_size &&
                 r.end_size == o.image_size && r.multiple >= 1 && r.first_epoch >= 0 &&
                 r.first_epoch <= r.last_epoch,
             "image dataset '{}': the size ramp {} -> {} (multiple {}, epochs {} to {}) does not "
             "end at image_size {}, start in [{}, image_size] and run forwards",
             o.name, r.start_size, r.end_size, r.multiple, r.first_epoch, r.last_epoch,
             o.image_size, kMinImageSize);
  return p;
}

}  // namespace

std::vector<uint8_t> FolderImages::read(int64_t i) const { return read_image_file(where(i)); }

ImageFileSource::ImageFileSource(std::shared_ptr<const EncodedImages> images,
                                 ImageFileOptions options)
    : images_(checked(images, options)), options_(std::move(options)) {
  size_ = options_.limit > 0 ? std::min(options_.limit, images_->size()) : images_->size();
  bad_ = std::make_unique<std::atomic<bool>[]>(size_t(size_));
  for (int64_t i = 0; i < size_; ++i) bad_[size_t(i)].store(false, std::memory_order_relaxed);
}

namespace {

// `box` of a height x width image, in the coordinates of the same image decoded at
// scaled_height x scaled_width (a DCT scaling): each edge scaled and rounded, at least a pixel.
CropBox scale_box(const CropBox& box, int64_t height, int64_t width, int64_t scaled_height,
                  int64_t scaled_width) {
  if (scaled_height == height && scaled_width == width) return box;
  auto edge = [](int64_t v, int64_t from, int64_t to) { return (v * to + from / 2) / from; };
  CropBox s;
  s.top = std::min(edge(box.top, height, scaled_height), scaled_height - 1);
  s.left = std::min(edge(box.left, width, scaled_width), scaled_width - 1);
  s.height = std::clamp<int64_t>(edge(box.top + box.height, height, scaled_height) - s.top, 1,
                                 scaled_height - s.top);
  s.width = std::clamp<int64_t>(edge(box.left + box.width, width, scaled_width) - s.left, 1,
                                scaled_width - s.left);
  return s;
}

// Ceiling of a * b / c for positive values.
int64_t scaled_up(int64_t a, int64_t b, int64_t c) { return (a * b + c - 1) / c; }

}  // namespace

template <typename T>
bool ImageFileSource::write_as(int64_t index, const SampleRequest& request, T* out, T* mirrored,
                               int64_t* label) const {
  // Read every time, even after a failure: a JPEG is decoded only down to its crop, so whether
  // a damaged file fails depends on this read's crop, and a skip decided by an earlier epoch
  // would make the batches depend on what this process read before (a resumed run would differ).
  std::atomic<bool>& bad = bad_[size_t(index)];
  const int64_t s = side_at(request.epoch);
  // The crop (and the resize it implies) is drawn on the image's full size, from its header;
  // then the image is decoded at the smallest DCT scaling that keeps the crop at least s x s
  // (evaluation: at least the resized size), the box following the scaling, and only the part
  // the resize reads (the box, or evaluation's centre window) is decoded.
  CropBox box, window{0, 0, s, s};
  const bool antialiased = !request.augment && options_.eval_antialias;
  int64_t resized_height = s, resized_width = s;
  bool flip = false;
  // Decoded into this thread's buffer, which keeps its memory from one image to the next.
  thread_local DecodedImage img;
  try {
    const std::vector<uint8_t> bytes = images_->read(index);
    const std::string where = images_->where(index);
    const ImageHeader header = read_image_header(bytes.data(), bytes.size(), where);
    box = CropBox{0, 0, header.height, header.width};
    DecodeRequest request_decode;
    if (request.augment) {
      const SizedAugmentation aug =
          draw_resized_crop(request.seed, request.epoch, index, header.height, header.width,
                            options_.crop, options_.flip);
      box = aug.box;
      flip = aug.flip;
      request_decode.min_height = scaled_up(header.height, s, box.height);
      request_decode.min_width = scaled_up(header.width, s, box.width);
    } else {
      const EvalGeometry g = eval_geometry(header.height, header.width, eval_resize_for(s), s);
      resized_height = g.resized_height;
      resized_width = g.resized_width;
      window = g.window;
      request_decode.min_height = resized_height;
      request_decode.min_width = resized_width;
    }
    const ImageSize scaled =
        decoded_size(header, request_decode.min_height, request_decode.min_width);
    box = scale_box(box, header.height, header.width, scaled.height, scaled.width);
    request_decode.region =
        resize_footprint(box, resized_height, resized_width, window, antialiased);
    decode_image_into(bytes.data(), bytes.size(), where, request_decode, img);
    HG_ASSERT(img.image_height == scaled.height && img.image_width == scaled.width,
              "{}: decoded at {}x{}, expected {}x{}", where, img.image_height, img.image_width,
              scaled.height, scaled.width);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidInput) throw;  // the machine failed, not the file
    if (!bad.exchange(true)) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      HG_LOG_WARN(
          "skipping an unreadable image (reported once; the loader takes the next "
          "sample): {}",
          untrusted_excerpt(e.one_line(), kPathMax));
    }
    return false;
  }
  // The image with its flip and, when asked, with the flip inverted.
  const ImageTransform& transform = *request.transform;
  if (request.augment && transform.program_rows() > 0) {
    HG_ASSERT(transform.height() == s && transform.width() == s,
              "image dataset '{}': a {}x{} transform for epoch {}'s {}x{} samples", options_.name,
              transform.height(), transform.width(), request.epoch, s, s);
    // An automatic augmentation or colour jitter runs on the crop's uint8 pixels (as
    // torchvision's run on a PIL image), then the table normalises them.
    Augmentation program;
    const Augmentation drawn = transform.draw(request.seed, request.epoch, index);
    program.ops = drawn.ops;
    program.op_count = drawn.op_count;
    thread_local std::vector<uint8_t> pixels;
    pixels.resize(size_t(s * s * 3));
    resize_bilinear(img.region(), box, resized_height, resized_width, window, flip, pixels.data());
    for (T* dst : {out, mirrored})
      if (dst != nullptr) transform.apply(pixels.data(), program, dst);
    *label = images_->label(index);
    return true;
  }
  for (T* dst : {out, mirrored}) {
    if (dst == nullptr) continue;
    const bool flipped = dst == out ? flip : !flip;
    if constexpr (std::is_same_v<T, float>) {
      const float* scale = transform.scale().data();
      const float* bias = transform.bias().data();
      if (antialiased)
        resize_antialiased(img.region(), box, resized_height, resized_width, window, flipped, dst,
                           scale, bias);
      else
        resize_bilinear(img.region(), box, resized_height, resized_width, window, flipped, dst,
                        scale, bias);
    } else if (antialiased) {
      resize_antialiased(img.region(), box, resized_height, resized_width, window, flipped, dst);
    } else {
      resize_bilinear(img.region(), box, resized_height, resized_width, window, flipped, dst);
    }
  }
  *label = images_->label(index);
  return true;
}

bool ImageFileSource::write(int64_t index, const SampleRequest& request, float* out,
                            float* mirrored, int64_t* label) const {
  return write_as(index, request, out, mirrored, label);
}

bool ImageFileSource::write(int64_t index, const SampleRequest& request, uint8_t* out,
                            uint8_t* mirrored, int64_t* label) const {
  return write_as(index, request, out, mirrored, label);
}

void require_same_classes(const ImageFileSource& train, const ImageFileSource& test) {
  if (train.classes() == test.classes()) return;
  const std::vector<std::string>&a = train.classes(), &b = test.classes();
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  auto at = [i](const std::vector<std::string>& c) {
    return i < c.size() ? fmt::format("'{}'", c[i]) : std::string("none");
  };
  throw_invalid(fmt::format("the train and test splits hold different classes: {} has {}, {} "
                            "has {}; label {} is {} in one and {} in the other",
                            train.source(), a.size(), test.source(), b.size(), i, at(a), at(b)),
                "give both splits one folder per class, with the same folder names");
}

}  // namespace hg::data
