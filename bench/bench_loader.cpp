// DataLoader throughput on CIFAR-format data (50,000 32x32x3 images, crop 4 + flip, batch 512):
// the host path with 1..16 worker threads, and the dataset on the GPU (where the build has one
// and a device is visible). images/s over whole epochs; the device epochs end with a read of
// the last batch, so their queued kernels are counted. Then a folder of ImageNet-sized JPEGs
// (512 images of 500x375 written here, 224 px RandomResizedCrop + flip, batch 16): the loader
// with 1..16 workers, normalised f32 or uint8 batches; one sample of the source alone (read, decode
// the crop's region, resize, normalise), cycling over the images with their crops; and one image's
// parts alone (read and full decode, read and decode of one crop's region, crop and resize).
//   ./build/bench/bench_loader [--benchmark_filter=Device]
#include <benchmark/benchmark.h>

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "hourglass/base/rng.h"
#include "hourglass/data/image_decode.h"
#include "hourglass/data/image_resize.h"
#include "hourglass/data/image_split.h"
#include "hourglass/data/loader.h"
#include "hourglass/device/device.h"
#include "hourglass/ops/ops.h"

namespace hg::data {
namespace {

std::shared_ptr<const ImageDataset> cifar_shaped() {
  static const auto ds = std::make_shared<const ImageDataset>(
      make_synthetic(50000, 32, 32, 3, 10, /*seed=*/1, Split::Train));
  return ds;
}

LoaderOptions cifar_options(int workers, Device placement) {
  LoaderOptions o;
  o.batch_size = 512;
  o.seed = 1;
  o.augment = true;
  o.transform = default_transform("cifar10");
  o.workers = workers;
  o.placement = placement;
  return o;
}

void run_epochs(benchmark::State& state, DataLoader& loader) {
  int64_t epoch = 0, images = 0;
  for (auto _ : state) {
    loader.start_epoch(epoch++);
    Tensor last;
    while (auto b = loader.next()) {
      images += b->labels.size(0);
      last = b->labels;
    }
    if (last.device().is_gpu()) benchmark::DoNotOptimize(ops::sum(last).item());
  }
  state.counters["images/s"] = benchmark::Counter(double(images), benchmark::Counter::kIsRate);
}

void BM_HostLoader(benchmark::State& state) {
  DataLoader loader(cifar_shaped(), cifar_options(int(state.range(0)), Device::cpu()));
  run_epochs(state, loader);
}
BENCHMARK(BM_HostLoader)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_DeviceLoader(benchmark::State& state) {
  if (gpu_device_count() == 0) {
    state.SkipWithError("no GPU");
    return;
  }
  DataLoader loader(cifar_shaped(), cifar_options(0, Device::gpu(0)));
  run_epochs(state, loader);
}
BENCHMARK(BM_DeviceLoader)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- a folder of JPEGs

constexpr int kJpegs = 512;

// root/train/class_k/img_i.jpg: 500x375 (every third 375x500), smooth colour waves plus noise,
// quality 90 4:2:0, about the size of a photo's JPEG; written once per machine.
std::string jpeg_folder() {
  static const std::string root = [] {
    const std::string dir =
        (std::filesystem::temp_directory_path() / "hourglass-bench-jpegs").string();
    const std::string done = dir + "/complete";
    if (std::filesystem::exists(done)) return dir;
    tjhandle tj = tjInitCompress();
    for (int i = 0; i < kJpegs; ++i) {
      const int h = i % 3 ? 375 : 500, w = i % 3 ? 500 : 375;
      RandomStream rng(uint64_t(i), 7);
      std::vector<uint8_t> px(size_t(h) * w * 3);
      double f[3][3];
      for (auto& c : f)
        for (double& v : c) v = rng.uniform();
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int c = 0; c < 3; ++c) {
            const double wave = std::sin(0.05 * f[c][0] * y + 0.05 * f[c][1] * x + 6.3 * f[c][2]);
            const double v = 128 + 80 * wave + 12 * rng.normal();
            px[(size_t(y) * w + x) * 3 + c] = uint8_t(std::clamp(v, 0.0, 255.0));
          }
      unsigned char* out = nullptr;
      unsigned long size = 0;
      tjCompress2(tj, px.data(), w, 0, h, TJPF_RGB, &out, &size, TJSAMP_420, 90, 0);
      const std::string cls = fmt::format("{}/train/class_{}", dir, i % 10);
      std::filesystem::create_directories(cls);
      std::ofstream(fmt::format("{}/img_{:04d}.jpg", cls, i), std::ios::binary)
          .write(reinterpret_cast<const char*>(out), std::streamsize(size));
      tjFree(out);
    }
    tjDestroy(tj);
    std::filesystem::create_directories(dir + "/val/class_0");
    std::filesystem::copy_file(dir + "/train/class_0/img_0000.jpg", dir + "/val/class_0/a.jpg",
                               std::filesystem::copy_options::overwrite_existing);
    std::ofstream(done) << "ok";
    return dir;
  }();
  return root;
}

// Arguments: workers, then 0 for normalised f32 batches (a CPU run's), 1 for uint8 ones (a GPU
// run's, normalised on the device).
void BM_FolderLoader(benchmark::State& state) {
  ImageFileOptions files;
  files.image_size = 224;
  auto source = open_image_split(jpeg_folder(), Split::Train, files);
  LoaderOptions o;
  o.batch_size = 16;  // 32 batches an epoch: enough for 16 workers to run at once
  o.seed = 1;
  o.augment = true;
  o.transform = default_transform("folder");
  o.workers = int(state.range(0));
  o.pixels = state.range(1) != 0 ? BatchPixels::Uint8 : BatchPixels::Normalized;
  DataLoader loader(source, o);
  run_epochs(state, loader);
}
BENCHMARK(BM_FolderLoader)
    ->ArgsProduct({{1, 2, 4, 8, 15, 16}, {0, 1}})
    ->ArgNames({"workers", "u8"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One sample as a loader worker builds it, without the batch around it: ImageFileSource::write
// of image i with its RandomResizedCrop and flip of epoch 0, i cycling over the 512 images;
// argument 0: normalised f32, 1: uint8.
template <typename T>
void folder_samples(benchmark::State& state) {
  ImageFileOptions files;
  files.image_size = 224;
  auto source = open_image_split(jpeg_folder(), Split::Train, files);
  const ImageTransform transform(default_transform("folder"), 224, 224, 3);
  const SampleRequest request{1, 0, true, &transform};
  std::vector<T> out(224 * 224 * 3);
  int64_t i = 0, label = 0;
  for (auto _ : state) {
    source->write(i++ % source->size(), request, out.data(), nullptr, &label);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["images/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_FolderSample(benchmark::State& state) {
  if (state.range(0) != 0)
    folder_samples<uint8_t>(state);
  else
    folder_samples<float>(state);
}
BENCHMARK(BM_FolderSample)->Arg(0)->Arg(1)->ArgName("u8")->Unit(benchmark::kMicrosecond);

// One 500x375 JPEG's parts: reading and decoding at full size; reading and decoding the region
// a 260x300 crop's resize to 224 reads, at the scaling the source picks for it (7/8); that
// crop's resize (from the full decode).
void BM_JpegDecode(benchmark::State& state) {
  const std::string path = jpeg_folder() + "/train/class_1/img_0001.jpg";
  for (auto _ : state) benchmark::DoNotOptimize(read_image(path).pixels.data());
  state.counters["images/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_JpegDecode)->Unit(benchmark::kMicrosecond);

// libjpeg-turbo's own cost at each DCT scaling k/8 (the argument), the whole image through
// TurboJPEG (decode_image uses only 1/8, 1/4, 1/2 and 1): it has SIMD inverse DCTs for those
// only; at the other scalings (and 4:2:0 chroma at 2k/16, in place of its SIMD upsampling) it
// runs C ones.
void BM_JpegDecodeScaled(benchmark::State& state) {
  const std::vector<uint8_t> bytes = read_image_file(jpeg_folder() + "/train/class_1/img_0001.jpg");
  const tjscalingfactor factor{int(state.range(0)), 8};
  const int width = TJSCALED(500, factor), height = TJSCALED(375, factor);
  std::vector<uint8_t> pixels(size_t(width) * size_t(height) * 3);
  tjhandle tj = tjInitDecompress();
  for (auto _ : state) {
    if (tjDecompress2(tj, bytes.data(), bytes.size(), pixels.data(), width, 0, height, TJPF_RGB,
                      0) != 0)
      state.SkipWithError(tjGetErrorStr2(tj));
    benchmark::DoNotOptimize(pixels.data());
  }
  tjDestroy(tj);
  state.counters["images/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_JpegDecodeScaled)->DenseRange(1, 8)->ArgName("eighths")->Unit(benchmark::kMicrosecond);

void BM_JpegDecodeRegion(benchmark::State& state) {
  const std::string path = jpeg_folder() + "/train/class_1/img_0001.jpg";
  const CropBox box{40, 60, 260, 300};
  DecodeRequest request;
  request.min_height = (375 * 224 + box.height - 1) / box.height;
  request.min_width = (500 * 224 + box.width - 1) / box.width;
  DecodedImage img;
  for (auto _ : state) {
    const std::vector<uint8_t> bytes = read_image_file(path);
    const ImageHeader header = read_image_header(bytes.data(), bytes.size(), path);
    const ImageSize scaled = decoded_size(header, request.min_height, request.min_width);
    const CropBox at_scale{
        box.top * scaled.height / header.height, box.left * scaled.width / header.width,
        box.height * scaled.height / header.height, box.width * scaled.width / header.width};
    request.region = resize_footprint(at_scale, 224, 224, {0, 0, 224, 224});
    decode_image_into(bytes.data(), bytes.size(), path, request, img);
    benchmark::DoNotOptimize(img.pixels.data());
  }
  state.counters["images/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_JpegDecodeRegion)->Unit(benchmark::kMicrosecond);

// Argument 0: normalised f32 (a CPU run's samples), 1: rounded to uint8 (a GPU run's).
void BM_CropResize224(benchmark::State& state) {
  const DecodedImage img = read_image(jpeg_folder() + "/train/class_1/img_0001.jpg");
  std::vector<float> out(224 * 224 * 3);
  std::vector<uint8_t> bytes(224 * 224 * 3);
  const CropBox box{40, 60, 260, 300}, window{0, 0, 224, 224};
  const ImageTransform transform(default_transform("folder"), 224, 224, 3);
  const bool u8 = state.range(0) != 0;
  for (auto _ : state) {
    if (u8)
      resize_bilinear(img.region(), box, 224, 224, window, true, bytes.data());
    else
      resize_bilinear(img.region(), box, 224, 224, window, true, out.data(),
                      transform.scale().data(), transform.bias().data());
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(bytes.data());
  }
  state.counters["images/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CropResize224)->Arg(0)->Arg(1)->ArgName("u8")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hg::data
