// A DataLoader with the dataset on the GPU (placement = gpu) hands out the very batches of the
// host loader, bit for bit: the same samples in the same order and the same crops, flips and
// cutout squares or erased rectangles for the same seed, every epoch, from any resume point; only
// their device differs. A folder of JPEGs loaded for a GPU (pinned batches of a BatchMover) comes
// as uint8 batches, normalised on the GPU to the CPU's values bit for bit.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/image_fixtures.h"
#include "hourglass/data/image_split.h"
#include "hourglass/data/loader.h"
#include "hourglass/tensor/batch_mover.h"
#include "support/gpu.h"

namespace hg::data {
namespace {

LoaderOptions options(Device placement, bool augment, bool erasing = false, bool program = false) {
  LoaderOptions o;
  o.batch_size = 48;
  o.seed = 21;
  o.augment = augment;
  o.transform = default_transform("cifar10");  // mean/std, crop padding 4, flip
  o.transform.cutout = 16;                     // as DeVries & Taylor for CIFAR-10
  if (erasing) {  // random erasing's rectangles in place of the cutout squares
    o.transform.cutout = 0;
    o.transform.random_erasing = 0.5;
  }
  if (program) {  // TrivialAugmentWide and colour jitter: the resident set's three-op path
    o.transform.auto_augment.policy = AutoAugment::TrivialAugmentWide;
    o.transform.color_jitter = {.brightness = 0.4, .contrast = 0.4, .saturation = 0.4, .hue = 0.1};
  }
  o.workers = 2;
  o.placement = placement;
  return o;
}

void expect_same_epoch(DataLoader& host, DataLoader& device, int64_t epoch, int64_t first) {
  host.start_epoch(epoch, first);
  device.start_epoch(epoch, first);
  int64_t batches = 0;
  while (auto h = host.next()) {
    auto d = device.next();
    ASSERT_TRUE(d.has_value()) << "the device loader ended early at batch " << h->index;
    ASSERT_EQ(d->images.device(), device.options().placement);
    ASSERT_EQ(d->labels.device(), device.options().placement);
    EXPECT_EQ(d->index, h->index);
    ASSERT_EQ(d->images.shape(), h->images.shape());
    ASSERT_EQ(d->labels.to_vector<int64_t>(), h->labels.to_vector<int64_t>());
    ASSERT_EQ(d->images.to_vector<float>(), h->images.to_vector<float>())
        << "epoch " << epoch << " batch " << h->index;
    ASSERT_EQ(d->mirrored.defined(), h->mirrored.defined());
    if (h->mirrored.defined())
      ASSERT_EQ(d->mirrored.to_vector<float>(), h->mirrored.to_vector<float>())
          << "mirrored, epoch " << epoch << " batch " << h->index;
    ++batches;
  }
  EXPECT_FALSE(device.next().has_value());
  EXPECT_EQ(batches, host.batches_per_epoch() - first);
}

TEST(GpuLoader, DeviceResidentBatchesAreTheHostBatches) {
  HG_REQUIRE_GPU();
  // 203 samples: a partial last batch.
  auto ds = std::make_shared<const ImageDataset>(
      make_synthetic(203, 32, 32, 3, 10, /*seed=*/4, Split::Train));
  for (bool augment : {false, true}) {
    SCOPED_TRACE(augment ? "augmented" : "plain");
    DataLoader host(ds, options(Device::cpu(), augment));
    DataLoader device(ds, options(Device::gpu(0), augment));
    EXPECT_EQ(device.device_bytes(), 203 * 32 * 32 * 3 + 203);
    EXPECT_EQ(host.device_bytes(), 0);
    for (int64_t epoch : {0, 1, 5}) expect_same_epoch(host, device, epoch, 0);
    expect_same_epoch(host, device, 3, 2);  // resumed mid-epoch
    // A rank's shard (data-parallel training), the last batch's part empty for rank 7 of 8.
    LoaderOptions host_shard = options(Device::cpu(), augment),
                  device_shard = options(Device::gpu(0), augment);
    host_shard.shard_count = device_shard.shard_count = 8;
    host_shard.shard_rank = device_shard.shard_rank = 7;
    host_shard.batch_size = device_shard.batch_size = 100;  // last batch: 3 rows
    DataLoader host_part(ds, host_shard), device_part(ds, device_shard);
    expect_same_epoch(host_part, device_part, 2, 0);
    // Mirrored batches (test-time flip averaging).
    LoaderOptions host_mirror = options(Device::cpu(), augment),
                  device_mirror = options(Device::gpu(0), augment);
    host_mirror.mirror = device_mirror.mirror = true;
    DataLoader host_m(ds, host_mirror), device_m(ds, device_mirror);
    expect_same_epoch(host_m, device_m, 4, 0);
  }
  // Random erasing, plain and mirrored; with a program (TrivialAugmentWide and colour jitter)
  // too.
  for (bool program : {false, true})
    for (bool mirror : {false, true}) {
      LoaderOptions host_o = options(Device::cpu(), true, true, program),
                    device_o = options(Device::gpu(0), true, true, program);
      host_o.mirror = device_o.mirror = mirror;
      DataLoader host(ds, host_o), device(ds, device_o);
      expect_same_epoch(host, device, 1, 0);
    }
}

// What a GPU run does with a folder: BatchMover's pinned batches (so BatchPixels::Auto is
// uint8), moved by the mover's copy stream and normalised on the GPU by model_images; the same
// floats as the CPU normalising the same uint8 batch, and as a CPU loader's uint8 batches.
TEST(GpuLoader, FolderBatchesGoToTheGpuAsUint8) {
  HG_REQUIRE_GPU();
  test::ScratchDir dir;
  for (int i = 0; i < 10; ++i) {
    const int h = 40 + 9 * i, w = 77 - 4 * i;
    const std::string cls = fmt::format("{}/train/k{}", dir.path(), i % 3);
    std::filesystem::create_directories(cls);
    test::write_file(fmt::format("{}/{}.jpg", cls, i),
                     test::encode_jpeg(test::noisy_pixels(h, w, 3, i), h, w, 3, TJSAMP_420));
  }
  ImageFileOptions files;
  files.image_size = 32;
  auto source = open_image_split(dir.path(), Split::Train, files);
  const Device g = Device::gpu(0);
  BatchMover mover(g);
  for (const bool augment : {false, true}) {
    SCOPED_TRACE(augment ? "augmented" : "plain");
    LoaderOptions o;
    o.batch_size = 4;
    o.seed = 3;
    o.augment = augment;
    o.mirror = true;
    o.transform = default_transform(kImageFolderDataset);
    o.workers = 2;
    LoaderOptions cpu_options = o;
    cpu_options.pixels = BatchPixels::Uint8;
    o.host_allocator = [&mover](const Shape& shape, DType dtype) {
      return mover.host_empty(shape, dtype);
    };
    DataLoader gpu_loader(source, o), cpu_loader(source, cpu_options);
    ASSERT_EQ(gpu_loader.pixels(), BatchPixels::Uint8);
    gpu_loader.start_epoch(1);
    cpu_loader.start_epoch(1);
    while (auto b = gpu_loader.next()) {
      const auto c = cpu_loader.next();
      ASSERT_TRUE(c.has_value());
      ASSERT_EQ(b->images.dtype(), DType::U8);
      ASSERT_EQ(b->images.to_vector<uint8_t>(), c->images.to_vector<uint8_t>());
      // Each view is normalised before the next is moved (BatchMover's rule).
      for (const bool mirrored : {false, true}) {
        const Tensor& host = mirrored ? b->mirrored : b->images;
        const Tensor on_gpu = gpu_loader.model_images(host, g, &mover);
        ASSERT_EQ(on_gpu.device(), g);
        ASSERT_EQ(on_gpu.dtype(), DType::F32);
        const std::vector<float> got = on_gpu.to_vector<float>();
        const std::vector<float> want =
            cpu_loader.model_images(mirrored ? c->mirrored : c->images, Device::cpu())
                .to_vector<float>();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_TRUE(std::isfinite(got[i])) << "value " << i;
          ASSERT_EQ(got[i], want[i]) << "batch " << b->index << " value " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hg::data
