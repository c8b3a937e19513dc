#include "hourglass/data/image_files.h"

#include <algorithm>

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

bool ImageFileSource::write(int64_t index, const SampleRequest& request, float* out,
                            float* mirrored, int64_t* label) const {
  std::atomic<bool>& bad = bad_[size_t(index)];
  if (bad.load(std::memory_order_relaxed)) return false;
  DecodedImage img;
  try {
    const std::vector<uint8_t> bytes = images_->read(index);
    img = decode_image(bytes.data(), bytes.size(), images_->where(index));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidInput) throw;  // the machine failed, not the file
    if (!bad.exchange(true)) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      HG_LOG_WARN(
          "skipping an unreadable image (reported once; the loader takes the next "
          "sample): {}",
          e.one_line());
    }
    return false;
  }
  const int64_t s = options_.image_size;
  // The crop (and the resize it implies), then the image with its flip and, when asked, with
  // the flip inverted.
  CropBox box{0, 0, img.height, img.width}, window{0, 0, s, s};
  int64_t resized_height = s, resized_width = s;
  bool flip = false;
  if (request.augment) {
    const SizedAugmentation aug = draw_resized_crop(request.seed, request.epoch, index, img.height,
                                                    img.width, options_.crop, options_.flip);
    box = aug.box;
    flip = aug.flip;
  } else {
    const EvalGeometry g = eval_geometry(img.height, img.width, eval_resize_for(s), s);
    resized_height = g.resized_height;
    resized_width = g.resized_width;
    window = g.window;
  }
  for (float* dst : {out, mirrored}) {
    if (dst == nullptr) continue;
    resize_bilinear(img.pixels.data(), img.height, img.width, 3, box, resized_height, resized_width,
                    window, dst == out ? flip : !flip, dst);
    request.transform->normalize(dst);
  }
  *label = images_->label(index);
  return true;
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
