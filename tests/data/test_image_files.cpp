// Image files through the DataLoader: RGB batches of image_size, the train/val/test folders,
// JPEG samples decoded in part equal to those of the whole image, uint8 samples the rounded
// resize (normalised by model_images within half a pixel level of the f32 samples), identical
// batches whatever the worker count, corrupt files (a cut-short JPEG, random bytes
// named .jpg, a PNG with a bad CRC) reported once by path, skipped for the next sample and
// counted, a JPEG damaged below some crops skipped by epoch as a resumed run skips it, and the
// errors of a bad layout.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "data/image_fixtures.h"
#include "hourglass/data/image_decode.h"
#include "hourglass/data/image_split.h"
#include "hourglass/data/loader.h"

namespace hg::data {
namespace {

namespace fs = std::filesystem;
using test::Bytes;
using test::fails_with;

// Class c's images are a constant colour (10 + 80c, 200 - 60c, 30 + 50c) of varied sizes, as
// PNG (lossless) so every crop of them normalises to known values.
std::array<uint8_t, 3> class_colour(int c) {
  return {uint8_t(10 + 80 * c), uint8_t(200 - 60 * c), uint8_t(30 + 50 * c)};
}

Bytes constant_png(int h, int w, int c) {
  Bytes px(size_t(h) * w * 3);
  const auto rgb = class_colour(c);
  for (size_t i = 0; i < px.size(); ++i) px[i] = rgb[i % 3];
  return test::encode_png(px, h, w);
}

void put(const std::string& path, const Bytes& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  test::write_file(path, bytes);
}

// root/<split>/{c0,c1,c2}/ with `per_class` constant PNGs (some named .jpg) of varied sizes.
void make_split(const std::string& root, const std::string& split, int per_class) {
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < per_class; ++i) {
      const std::string name =
          fmt::format("{}/{}/c{}/img{:02d}.{}", root, split, c, i, i % 3 == 0 ? "jpg" : "png");
      put(name, constant_png(20 + 7 * i, 31 - 3 * i + c, c));
    }
  }
}

// Captures what the default logger writes while alive.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000)) {
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::vector<std::string> lines() const { return sink_->last_formatted(); }
  int count(const std::string& fragment) const {
    int n = 0;
    for (const auto& l : lines()) n += l.find(fragment) != std::string::npos;
    return n;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

LoaderOptions options(bool augment, int workers, int64_t batch = 5) {
  LoaderOptions o;
  o.batch_size = batch;
  o.shuffle = augment;
  o.augment = augment;
  o.seed = 11;
  o.workers = workers;
  o.transform = default_transform(kImageFolderDataset);
  return o;
}

// root/train/k{0,1}/: six noisy JPEGs (4:2:0) of sizes 30x61 to 85x36, alternating classes.
void put_noisy_jpegs(const std::string& root) {
  for (int i = 0; i < 6; ++i) {
    const int h = 30 + 11 * i, w = 61 - 5 * i;
    put(fmt::format("{}/train/k{}/{}.jpg", root, i % 2, i),
        test::encode_jpeg(test::noisy_pixels(h, w, 3, i), h, w, 3, TJSAMP_420));
  }
}

std::vector<Batch> run_epoch(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

// Checks every image of `b` is the constant colour of its label, normalised.
void expect_constant_colours(const Batch& b, const TransformOptions& t) {
  const std::vector<float> v = b.images.to_vector<float>();
  const std::vector<int64_t> labels = b.labels.to_vector<int64_t>();
  const int64_t per = b.images.size(1) * b.images.size(2) * 3;
  for (size_t j = 0; j < labels.size(); ++j) {
    const auto rgb = class_colour(int(labels[j]));
    for (int64_t p = 0; p < per; p += 97) {
      const int ch = int(p % 3);
      const float want = (float(rgb[size_t(ch)]) / 255.0f - t.mean[size_t(ch)]) / t.std[size_t(ch)];
      ASSERT_NEAR(v[j * size_t(per) + size_t(p)], want, 1e-4)
          << "image " << j << " label " << labels[j];
    }
  }
}

TEST(ImageFiles, BatchesOfImageSizeWithTheirLabels) {
  test::ScratchDir dir;
  make_split(dir.path(), "train", 4);
  make_split(dir.path(), "val", 2);
  ImageFileOptions o;
  o.image_size = 16;
  auto train = open_image_split(dir.path(), Split::Train, o);
  auto test_set = open_image_split(dir.path(), Split::Test, o);
  EXPECT_EQ(train->size(), 12);
  EXPECT_EQ(test_set->size(), 6);
  EXPECT_EQ(train->num_classes(), 3);
  EXPECT_EQ(train->source(), dir.path() + "/train");
  EXPECT_EQ(test_set->source(), dir.path() + "/val");
  require_same_classes(*train, *test_set);
  for (const bool augment : {false, true}) {
    DataLoader loader(train, options(augment, 2));
    const auto batches = run_epoch(loader, 0);
    ASSERT_EQ(batches.size(), 3u);
    EXPECT_EQ(batches[0].images.shape(), (std::vector<int64_t>{5, 16, 16, 3}));
    EXPECT_EQ(batches[2].images.shape(), (std::vector<int64_t>{2, 16, 16, 3}));
    for (const Batch& b : batches) expect_constant_colours(b, loader.options().transform);
    EXPECT_EQ(loader.skipped_samples(), 0);
  }
}

TEST(ImageFiles, SameBatchesWhateverTheWorkerCount) {
  test::ScratchDir dir;
  // Pattern images (JPEG and PNG) so that crops and flips show.
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < 7; ++i) {
      const int h = 24 + 5 * i, w = 40 - 3 * i;
      put(fmt::format("{}/train/k{}/{}.jpg", dir.path(), c, i), test::jpeg_of(h, w, c * 10 + i));
      put(fmt::format("{}/train/k{}/{}.png", dir.path(), c, i), test::png_of(w, h, c * 10 + i));
    }
  }
  ImageFileOptions o;
  o.image_size = 12;
  auto train = open_image_split(dir.path(), Split::Train, o);
  DataLoader serial(train, options(true, 0, 4));
  DataLoader threaded(train, options(true, 3, 4));
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const auto a = run_epoch(serial, epoch), b = run_epoch(threaded, epoch);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].images.to_vector<float>(), b[i].images.to_vector<float>()) << i;
      EXPECT_EQ(a[i].labels.to_vector<int64_t>(), b[i].labels.to_vector<int64_t>()) << i;
    }
  }
  // Another epoch crops differently.
  EXPECT_NE(serial.make_batch(0, 0).images.to_vector<float>(),
            serial.make_batch(1, 0).images.to_vector<float>());
}

// Sample `index` of `source` built from the whole image, as the loader did before it decoded
// only the crop's region: the header's size, the crop (training) or resize-and-centre window
// (evaluation), the whole image decoded at the DCT scaling that keeps the crop at least
// image_size (evaluation: the resized size), the box's edges scaled and rounded to that size, then
// the bilinear resize, normalised.
std::vector<float> whole_image_sample(const ImageFileSource& source, int64_t index, bool augment,
                                      const ImageTransform& t, uint64_t seed, int64_t epoch,
                                      bool eval_antialias = true) {
  const int64_t s = source.height();
  const Bytes bytes = source.images().read(index);
  const ImageHeader header = read_image_header(bytes.data(), bytes.size(), "x");
  CropBox box{0, 0, header.height, header.width}, window{0, 0, s, s};
  int64_t rh = s, rw = s, min_h = 0, min_w = 0;
  bool flip = false;
  if (augment) {
    const SizedAugmentation a =
        draw_resized_crop(seed, epoch, index, header.height, header.width, {}, true);
    box = a.box;
    flip = a.flip;
    min_h = (header.height * s + box.height - 1) / box.height;
    min_w = (header.width * s + box.width - 1) / box.width;
  } else {
    const EvalGeometry g = eval_geometry(header.height, header.width, eval_resize_for(s), s);
    rh = min_h = g.resized_height;
    rw = min_w = g.resized_width;
    window = g.window;
  }
  const DecodedImage img = decode_image(bytes.data(), bytes.size(), "x", {min_h, min_w, {}});
  auto edge = [](int64_t v, int64_t from, int64_t to) { return (v * to + from / 2) / from; };
  CropBox scaled = box;
  if (img.height != header.height || img.width != header.width) {
    scaled.top = std::min(edge(box.top, header.height, img.height), img.height - 1);
    scaled.left = std::min(edge(box.left, header.width, img.width), img.width - 1);
    scaled.height =
        std::clamp<int64_t>(edge(box.top + box.height, header.height, img.height) - scaled.top, 1,
                            img.height - scaled.top);
    scaled.width =
        std::clamp<int64_t>(edge(box.left + box.width, header.width, img.width) - scaled.left, 1,
                            img.width - scaled.left);
  }
  std::vector<float> out(size_t(s * s * 3));
  if (augment || !eval_antialias)  // training crops resize plain; evaluation antialiased
    resize_bilinear(img.region(), scaled, rh, rw, window, flip, out.data(), t.scale().data(),
                    t.bias().data());
  else
    resize_antialiased(img.region(), scaled, rh, rw, window, flip, out.data(), t.scale().data(),
                       t.bias().data());
  return out;
}

// Decoding only the crop's region changes no sample: every JPEG sample (4:2:0 and 4:4:4, noisy so
// that chroma upsampling shows, sizes not a multiple of the blocks; image_size 16 decodes at DCT
// scalings, 96 mostly at full size) equals the one built from the whole decoded image, bit for
// bit, in training and evaluation.
TEST(ImageFiles, JpegSamplesAreThoseOfTheWholeImage) {
  test::ScratchDir dir;
  for (int i = 0; i < 12; ++i) {
    const int h = 37 + 23 * i, w = 251 - 13 * i;
    const Bytes px = test::noisy_pixels(h, w, 3, i);
    put(fmt::format("{}/train/k{}/{}.jpg", dir.path(), i % 2, i),
        test::encode_jpeg(px, h, w, 3, i % 3 == 0 ? TJSAMP_444 : TJSAMP_420));
  }
  for (const int64_t size : {16, 96}) {
    ImageFileOptions o;
    o.image_size = size;
    auto train = open_image_split(dir.path(), Split::Train, o);
    // Evaluation resized plain (data.eval_antialias = false).
    o.eval_antialias = false;
    auto plain = open_image_split(dir.path(), Split::Train, o);
    {
      DataLoader loader(plain, options(false, 0, 12));
      const ImageTransform t(loader.options().transform, size, size, 3);
      const std::vector<float> got = loader.make_batch(0, 0).images.to_vector<float>();
      const std::vector<int64_t> order = epoch_order(12, false, 11, 0);
      const size_t per = size_t(size * size * 3);
      for (size_t j = 0; j < 12; ++j) {
        const std::vector<float> want =
            whole_image_sample(*plain, order[j], false, t, 11, 0, false);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + j * per))
            << "plain evaluation, sample " << order[j] << " size " << size;
      }
    }
    for (const bool augment : {false, true}) {
      DataLoader loader(train, options(augment, 0, 12));
      const ImageTransform t(loader.options().transform, size, size, 3);
      for (const int64_t epoch : {0, 3}) {
        const Batch b = loader.make_batch(epoch, 0);
        const std::vector<float> got = b.images.to_vector<float>();
        const std::vector<int64_t> order = epoch_order(12, augment, 11, epoch);
        const size_t per = size_t(size * size * 3);
        for (size_t j = 0; j < 12; ++j) {
          const std::vector<float> want =
              whole_image_sample(*train, order[j], augment, t, 11, epoch);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + j * per))
              << "sample " << order[j] << " size " << size << " augment " << augment << " epoch "
              << epoch;
        }
      }
    }
  }
}

// BatchPixels::Uint8: each value is the resize rounded to a whole pixel value (the rounding
// itself is tested in test_image_resize.cpp); model_images normalises it to exactly the table's
// value of that pixel value, within half a pixel level (0.5 * scale[c]) of the f32 sample, plus
// a few f32 roundings of values near 2. Mirrored too.
TEST(ImageFiles, Uint8SamplesAreTheResizeRounded) {
  test::ScratchDir dir;
  put_noisy_jpegs(dir.path());
  for (int i = 0; i < 6; ++i) {
    const int h = 30 + 11 * i, w = 61 - 5 * i;
    put(fmt::format("{}/train/k{}/{}.png", dir.path(), i % 2, i), test::png_of(w, h, i));
  }
  ImageFileOptions o;
  o.image_size = 24;
  auto train = open_image_split(dir.path(), Split::Train, o);
  for (const bool augment : {false, true}) {
    SCOPED_TRACE(augment ? "augmented" : "plain");
    LoaderOptions lo = options(augment, 2, 5);
    lo.mirror = true;
    LoaderOptions lu = lo;
    lu.pixels = BatchPixels::Uint8;
    DataLoader f32(train, lo), u8(train, lu);
    const ImageTransform t(lo.transform, 24, 24, 3);
    for (int64_t b = 0; b < f32.batches_per_epoch(); ++b) {
      const Batch want = f32.make_batch(1, b), got = u8.make_batch(1, b);
      ASSERT_EQ(got.images.dtype(), DType::U8);
      ASSERT_EQ(got.labels.to_vector<int64_t>(), want.labels.to_vector<int64_t>());
      for (const bool mirrored : {false, true}) {
        const Tensor& g = mirrored ? got.mirrored : got.images;
        const std::vector<uint8_t> pixels = g.to_vector<uint8_t>();
        const std::vector<float> normalised = u8.model_images(g, Device::cpu()).to_vector<float>();
        const std::vector<float> direct =
            (mirrored ? want.mirrored : want.images).to_vector<float>();
        ASSERT_EQ(pixels.size(), direct.size());
        for (size_t k = 0; k < pixels.size(); ++k) {
          const size_t c = k % 3;
          ASSERT_EQ(normalised[k], t.table()[c * 256 + pixels[k]])
              << "batch " << b << " value " << k;
          ASSERT_TRUE(std::isfinite(direct[k]));
          ASSERT_LE(std::abs(normalised[k] - direct[k]), 0.5f * t.scale()[c] * (1 + 1e-5f) + 1e-6f)
              << "batch " << b << " value " << k;
        }
      }
    }
  }
}

// An automatic augmentation and colour jitter on image files run on the resized crop's uint8
// pixels: each f32 sample is the crop of the same loader without them (its uint8 samples), put
// through the sample's program (ops::augment_images) and the normalisation table.
TEST(ImageFiles, AutomaticAugmentationRunsOnTheCropsPixels) {
  test::ScratchDir dir;
  put_noisy_jpegs(dir.path());
  ImageFileOptions o;
  o.image_size = 24;
  auto train = open_image_split(dir.path(), Split::Train, o);
  LoaderOptions plain = options(true, 2, 3);
  plain.shuffle = false;  // batch b, row j is sample 3b + j
  plain.pixels = BatchPixels::Uint8;
  LoaderOptions with = plain;
  with.pixels = BatchPixels::Normalized;
  with.transform.auto_augment.policy = AutoAugment::RandAugment;
  with.transform.color_jitter = {.brightness = 0.4, .contrast = 0.4, .saturation = 0.4, .hue = 0.1};
  DataLoader crops(train, plain), augmented(train, with);
  const ImageTransform t(with.transform, 24, 24, 3);
  int64_t changed = 0;
  for (int64_t b = 0; b < crops.batches_per_epoch(); ++b) {
    const Batch c = crops.make_batch(2, b), a = augmented.make_batch(2, b);
    const std::vector<uint8_t> pixels = c.images.to_vector<uint8_t>();
    const std::vector<float> got = a.images.to_vector<float>();
    const int64_t n = 24 * 24 * 3;
    for (int64_t j = 0; j < c.images.size(0); ++j) {
      const Augmentation drawn = t.draw(plain.seed, 2, 3 * b + j);
      ASSERT_GE(drawn.op_count, 4);  // the jitter's four at least
      Augmentation program;
      program.ops = drawn.ops;
      program.op_count = drawn.op_count;
      std::vector<float> want(static_cast<size_t>(n));
      t.apply(pixels.data() + j * n, program, want.data());
      ASSERT_EQ(std::vector<float>(got.begin() + j * n, got.begin() + (j + 1) * n), want)
          << "batch " << b << " row " << j;
      for (int64_t k = 0; k < n; ++k)
        changed += want[size_t(k)] != t.table()[size_t(k % 3) * 256 + pixels[size_t(j * n + k)]];
    }
  }
  EXPECT_GT(changed, 0);
}

// FFCV's get_resolution: np.interp's line between the ramp's ends, np.round to a multiple
// (halves to even). The expected sides were computed with numpy.
TEST(ImageSizeRamp, SidesAreNumpysInterpolationRoundedToTheMultiple) {
  auto sides = [](ImageSizeRamp r, int64_t epochs) {
    std::vector<int64_t> out;
    for (int64_t e = 0; e < epochs; ++e) out.push_back(r.side_at(e));
    return out;
  };
  EXPECT_EQ(sides(ImageSizeRamp{128, 192, 0, 4, 32}, 6),
            (std::vector<int64_t>{128, 128, 160, 192, 192, 192}));
  EXPECT_EQ(sides(ImageSizeRamp{64, 224, 2, 9, 16}, 12),
            (std::vector<int64_t>{64, 64, 64, 80, 112, 128, 160, 176, 208, 224, 224, 224}));
  const ImageSizeRamp ffcv{160, 192, 65, 76, 32};  // rn50_88_epochs.yaml
  EXPECT_EQ(ffcv.side_at(70), 160);
  EXPECT_EQ(ffcv.side_at(71), 192);
  EXPECT_EQ(ffcv.sides(88), (std::vector<int64_t>{160, 192}));
  EXPECT_EQ((ImageSizeRamp{8, 16, 3, 3, 4}.sides(6)), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ((ImageSizeRamp{0, 24, 0, 0, 32}.sides(3)), (std::vector<int64_t>{24}));  // off
}

// A ramped training source writes each epoch's samples at that epoch's side, the same bits as
// a source opened at that side, an automatic augmentation included (its translations are drawn
// for the epoch's side); the shapes the loader hands out follow.
TEST(ImageFiles, ProgressiveResizingGivesEachEpochTheSamplesOfItsSize) {
  test::ScratchDir dir;
  for (int i = 0; i < 8; ++i) {
    const int h = 30 + 9 * i, w = 50 - 3 * i;
    put(fmt::format("{}/train/k{}/{}.{}", dir.path(), i % 2, i, i % 2 ? "png" : "jpg"),
        i % 2 ? test::encode_png(test::noisy_pixels(h, w, 3, i), h, w)
              : test::encode_jpeg(test::noisy_pixels(h, w, 3, i), h, w, 3, TJSAMP_420));
  }
  ImageFileOptions o;
  o.image_size = 24;
  o.ramp = ImageSizeRamp{8, 24, 1, 3, 8};  // 8, 8, 16, 24
  auto ramped = open_image_split(dir.path(), Split::Train, o);
  EXPECT_EQ(ramped->height(), 24);
  for (const bool program : {false, true}) {
    LoaderOptions lo = options(true, 2, 3);
    if (program) lo.transform.auto_augment.policy = AutoAugment::TrivialAugmentWide;
    DataLoader loader(ramped, lo);
    for (const auto& [epoch, side] :
         std::vector<std::pair<int64_t, int64_t>>{{0, 8}, {1, 8}, {2, 16}, {3, 24}, {5, 24}}) {
      ImageFileOptions fixed_options = o;
      fixed_options.image_size = side;
      fixed_options.ramp = {};
      DataLoader fixed(open_image_split(dir.path(), Split::Train, fixed_options), lo);
      const auto got = run_epoch(loader, epoch);
      ASSERT_EQ(got.size(), 3u);
      for (size_t b = 0; b < got.size(); ++b) {
        EXPECT_EQ(got[b].images.shape(), (Shape{b == 2 ? 2 : 3, side, side, 3}))
            << "epoch " << epoch;
        const Batch want = fixed.make_batch(epoch, int64_t(b));
        EXPECT_EQ(got[b].images.to_vector<float>(), want.images.to_vector<float>())
            << "epoch " << epoch << " batch " << b << (program ? " with a program" : "");
        EXPECT_EQ(loader.make_batch(epoch, int64_t(b)).images.to_vector<float>(),
                  want.images.to_vector<float>());
      }
    }
  }
  o.ramp = ImageSizeRamp{32, 24, 0, 1, 8};  // starts above image_size
  EXPECT_TRUE(fails_with([&] { open_image_split(dir.path(), Split::Train, o); },
                         {"size ramp", "image_size"}));
}

TEST(ImageFiles, CorruptFilesAreReportedOnceSkippedAndCounted) {
  test::ScratchDir dir;
  make_split(dir.path(), "train", 4);  // c0: img00..img03, c1: ..., c2: ...
  const std::string r = dir.path() + "/train";
  const Bytes jpg = test::jpeg_of(64, 64, 3);
  put(r + "/c0/img01.jpg", test::truncated(jpg, jpg.size() * 3 / 4));  // a cut-short JPEG
  put(r + "/c1/img02.jpg", test::random_bytes(300, 5));                // noise named .jpg
  put(r + "/c2/img00.png", test::png_with_bad_crc(constant_png(9, 9, 2)));
  ImageFileOptions o;
  o.image_size = 10;
  auto train = open_image_split(dir.path(), Split::Train, o);
  ASSERT_EQ(train->size(), 15);  // 12 + c0/img01.jpg beside c0/img01.png
  LogCapture log;
  LoaderOptions lo = options(false, 2, 4);
  lo.max_unreadable = 0.2;  // 3 of 15: the most allowed
  DataLoader loader(train, lo);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const auto batches = run_epoch(loader, epoch);
    // No shuffle: position p holds sample p, or the next readable one after it.
    std::vector<int64_t> labels;
    for (const Batch& b : batches) {
      expect_constant_colours(b, loader.options().transform);
      for (int64_t l : b.labels.to_vector<int64_t>()) labels.push_back(l);
    }
    ASSERT_EQ(labels.size(), 15u);
    for (size_t p = 0; p < labels.size(); ++p) {
      // Each bad file is followed by a readable one of its own class, so the substitute at p
      // has the label of sample p.
      EXPECT_EQ(labels[p], train->images().label(int64_t(p))) << p;
    }
  }
  EXPECT_EQ(loader.skipped_samples(), 3);
  EXPECT_EQ(log.count("skipping an unreadable image"), 3);
  EXPECT_EQ(log.count(r + "/c0/img01.jpg: corrupt JPEG data"), 1);
  EXPECT_EQ(log.count(r + "/c1/img02.jpg: not a JPEG or PNG image"), 1);
  EXPECT_EQ(log.count(r + "/c2/img00.png: corrupt PNG"), 1);
  // The substitute is the next readable sample in the epoch's order: sample 1 (c0/img01.jpg)
  // is replaced by sample 2 (c0/img01.png), pixel for pixel.
  const Batch b = loader.make_batch(0, 0);
  const std::vector<float> v = b.images.to_vector<float>();
  const size_t per = 10 * 10 * 3;
  EXPECT_TRUE(std::equal(v.begin() + per, v.begin() + 2 * per, v.begin() + 2 * per));
}

// A JPEG damaged in its lower part: a marker where entropy-coded data should be, 85% of the way
// through it. Crops that end above the damage decode (rows below a crop are never decoded), the
// others fail. Whether the sample is skipped is decided by each epoch's read alone, so a loader
// over a fresh source started at epoch e (a resumed run) builds exactly the batches of one that
// ran the epochs before it.
TEST(ImageFiles, ADamagedLowerPartIsSkippedByEpochAsAResumedRunSkipsIt) {
  test::ScratchDir dir;
  make_split(dir.path(), "train", 3);
  Bytes jpg = test::jpeg_of(96, 96, 4);
  size_t sos = 0;
  for (size_t i = 2; i + 3 < jpg.size() && sos == 0; ++i)
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xDA)
      sos = i + 2 + ((size_t(jpg[i + 2]) << 8) | jpg[i + 3]);
  ASSERT_GT(sos, 0u);
  const size_t damage = sos + (jpg.size() - 2 - sos) * 85 / 100;
  jpg[damage] = 0xFF;
  jpg[damage + 1] = 0xD3;  // RST3, in a scan without restart markers
  put(dir.path() + "/train/c0/damaged.jpg", jpg);
  ImageFileOptions o;
  o.image_size = 16;
  LogCapture log;
  auto continuing = open_image_split(dir.path(), Split::Train, o);
  DataLoader loader(continuing, options(true, 2, 4));
  int read = 0, skipped = 0;
  for (int64_t epoch = 0; epoch < 10; ++epoch) {
    SCOPED_TRACE(epoch);
    const std::vector<Batch> a = run_epoch(loader, epoch);
    DataLoader resumed(open_image_split(dir.path(), Split::Train, o), options(true, 2, 4));
    const std::vector<Batch> b = run_epoch(resumed, epoch);
    ASSERT_EQ(a.size(), b.size());
    bool pattern = false;  // the damaged image (the only one not of one colour) read
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].images.to_vector<float>(), b[k].images.to_vector<float>()) << "batch " << k;
      EXPECT_EQ(a[k].labels.to_vector<int64_t>(), b[k].labels.to_vector<int64_t>());
      const std::vector<float> v = a[k].images.to_vector<float>();
      const int64_t per = 16 * 16 * 3;
      for (size_t j = 0; j + 1 < v.size() / size_t(per) + 1 && !pattern; ++j)
        for (int64_t p = 3; p < per && !pattern; p += 3)
          pattern = std::abs(v[j * size_t(per) + size_t(p)] - v[j * size_t(per)]) > 0.1f;
    }
    (pattern ? read : skipped) += 1;
  }
  // Both happened: the test saw crops above the damage and crops through it.
  EXPECT_GT(read, 0);
  EXPECT_GT(skipped, 0);
  EXPECT_EQ(loader.skipped_samples(), 1) << "one sample found unreadable (reported once)";
}

TEST(ImageFiles, EveryFileUnreadableIsAnError) {
  test::ScratchDir dir;
  put(dir.path() + "/train/a/x.jpg", test::random_bytes(50, 1));
  put(dir.path() + "/train/b/y.png", test::random_bytes(50, 2));
  LogCapture log;
  ImageFileOptions o;
  o.image_size = 8;
  LoaderOptions all = options(false, 0, 2);
  all.max_unreadable = 1;
  DataLoader loader(open_image_split(dir.path(), Split::Train, o), all);
  loader.start_epoch(0);
  EXPECT_TRUE(fails_with([&] { loader.next(); }, {"none of the 2 samples", dir.path() + "/train"}));
}

// More unreadable files than LoaderOptions::max_unreadable allows: an error naming the count as
// soon as they are found, not most of the dataset retried for every sample of every epoch.
TEST(ImageFiles, MoreUnreadableFilesThanAllowedIsAnError) {
  test::ScratchDir dir;
  for (int i = 0; i < 38; ++i)
    put(fmt::format("{}/train/a/bad{:02d}.jpg", dir.path(), i), test::random_bytes(60, i + 1));
  put(dir.path() + "/train/a/good0.jpg", test::jpeg_of(12, 12, 1));
  put(dir.path() + "/train/a/good1.jpg", test::jpeg_of(12, 12, 2));
  LogCapture log;
  ImageFileOptions o;
  o.image_size = 8;
  auto train = open_image_split(dir.path(), Split::Train, o);
  DataLoader loader(train, options(false, 0, 4));  // the default: 10%, here 4 files
  loader.start_epoch(0);
  EXPECT_TRUE(fails_with([&] { loader.next(); },
                         {"5 of the 40 samples", dir.path() + "/train", "data.max_unreadable = 0.1",
                          "raise data.max_unreadable"}));
  EXPECT_EQ(loader.skipped_samples(), 5) << "read on past the limit";
}

// LoaderOptions::mirror: each image also mirrored, the same crop with the flip inverted.
TEST(ImageFiles, MirroredImagesAreTheImagesFlipped) {
  test::ScratchDir dir;
  for (int i = 0; i < 5; ++i)
    put(fmt::format("{}/train/k/{}.jpg", dir.path(), i), test::jpeg_of(20 + i, 31 - i, i));
  ImageFileOptions o;
  o.image_size = 9;
  for (const bool augment : {false, true}) {
    LoaderOptions lo = options(augment, 1, 5);
    lo.mirror = true;
    DataLoader loader(open_image_split(dir.path(), Split::Train, o), lo);
    const Batch b = loader.make_batch(0, 0);
    ASSERT_TRUE(b.mirrored.defined());
    const std::vector<float> a = b.images.to_vector<float>(), m = b.mirrored.to_vector<float>();
    for (int64_t j = 0; j < 5; ++j) {
      for (int64_t y = 0; y < 9; ++y) {
        for (int64_t x = 0; x < 9; ++x) {
          for (int64_t c = 0; c < 3; ++c) {
            const size_t at = size_t(((j * 9 + y) * 9 + x) * 3 + c);
            const size_t flipped = size_t(((j * 9 + y) * 9 + (8 - x)) * 3 + c);
            ASSERT_EQ(m[at], a[flipped]) << "augment " << augment << " image " << j;
          }
        }
      }
    }
  }
}

TEST(ImageFiles, StayOnTheHost) {
  test::ScratchDir dir;
  make_split(dir.path(), "train", 1);
  ImageFileOptions o;
  o.image_size = 8;
  LoaderOptions lo = options(false, 0, 2);
  lo.placement = Device::gpu(0);
  // Refused before anything touches a GPU, so this holds without one too.
  EXPECT_TRUE(fails_with([&] { DataLoader(open_image_split(dir.path(), Split::Train, o), lo); },
                         {"decoded from files on the host", "gpu:0"}));
}

TEST(ImageFiles, LayoutErrorsNameWhatIsMissing) {
  test::ScratchDir dir;
  const ImageFileOptions o;
  EXPECT_TRUE(fails_with([&] { open_image_split(dir.path(), Split::Train, o); },
                         {dir.path() + "/train", "not found"}));
  EXPECT_TRUE(fails_with([&] { open_image_split(dir.path(), Split::Test, o); },
                         {dir.path() + "/val", dir.path() + "/test", "no test split"}));
  EXPECT_TRUE(fails_with([&] { open_image_split("", Split::Train, o); }, {"data.path"}));
  make_split(dir.path(), "test", 1);  // test/ when there is no val/
  EXPECT_EQ(open_image_split(dir.path(), Split::Test, o)->source(), dir.path() + "/test");
  put(dir.path() + "/train/c0/a.png", constant_png(4, 4, 0));
  put(dir.path() + "/train/other/a.png", constant_png(4, 4, 0));
  put(dir.path() + "/train/zz/a.png", constant_png(4, 4, 0));
  auto train = open_image_split(dir.path(), Split::Train, o);
  auto test_set = open_image_split(dir.path(), Split::Test, o);
  EXPECT_TRUE(fails_with([&] { require_same_classes(*train, *test_set); },
                         {"different classes", "label 1", "'other'", "'c1'"}));
  ImageFileOptions tiny = o;
  tiny.image_size = 4;
  EXPECT_TRUE(fails_with([&] { open_image_split(dir.path(), Split::Train, tiny); },
                         {"image_size", "[8, 4096]", "4"}));
}

}  // namespace
}  // namespace hg::data
