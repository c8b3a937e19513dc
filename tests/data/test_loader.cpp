// DataLoader: batch shapes and the partial last batch, every sample exactly once per epoch,
// shuffles that are a pure function of (seed, epoch), identical batches whatever the worker
// count, exact mid-epoch resume, clean stops, worker errors reaching next(), and uint8 batches
// (BatchPixels) that model_images normalises to the f32 batches bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "data/fixtures.h"
#include "hourglass/data/loader.h"
#include "hourglass/device/allocator.h"

namespace hg::data {
namespace {

using test::fails_with;

constexpr int64_t kH = 2, kW = 3, kC = 2;

// n images whose first two bytes encode the sample index (low, high byte); label i % classes.
std::shared_ptr<const ImageDataset> indexed_dataset(int64_t n, int64_t classes = 10) {
  auto ds = std::make_shared<ImageDataset>();
  ds->name = "indexed";
  ds->height = kH;
  ds->width = kW;
  ds->channels = kC;
  ds->num_classes = classes;
  ds->pixels.resize(size_t(n * kH * kW * kC));
  ds->labels.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* img = ds->pixels.data() + i * kH * kW * kC;
    img[0] = uint8_t(i & 255);
    img[1] = uint8_t(i >> 8);
    for (int64_t p = 2; p < kH * kW * kC; ++p) img[p] = uint8_t((i * 7 + p * 13) % 256);
    ds->labels[size_t(i)] = uint8_t(i % classes);
  }
  return ds;
}

// The sample indices of a batch built without normalisation or augmentation.
std::vector<int64_t> sample_ids(const Batch& b) {
  const std::vector<float> v = b.images.to_vector<float>();
  const int64_t per = kH * kW * kC;
  std::vector<int64_t> ids;
  for (int64_t j = 0; j < b.images.size(0); ++j) {
    const auto lo = int64_t(std::lround(v[size_t(j * per)] * 255.0f));
    const auto hi = int64_t(std::lround(v[size_t(j * per + 1)] * 255.0f));
    ids.push_back(lo + 256 * hi);
  }
  return ids;
}

std::vector<Batch> drain(DataLoader& loader) {
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

std::vector<Batch> epoch(DataLoader& loader, int64_t e, int64_t first = 0) {
  loader.start_epoch(e, first);
  return drain(loader);
}

void expect_same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].epoch, b[i].epoch);
    EXPECT_EQ(a[i].images.shape(), b[i].images.shape());
    EXPECT_EQ(a[i].images.to_vector<float>(), b[i].images.to_vector<float>()) << "batch " << i;
    EXPECT_EQ(a[i].labels.to_vector<int64_t>(), b[i].labels.to_vector<int64_t>()) << "batch " << i;
  }
}

// Sharded loaders (data-parallel ranks) split each global batch into consecutive parts: put
// back together in rank order they are the unsharded batch, so every sample of the epoch is
// seen exactly once, in the same number of batches on every rank; a last batch with fewer rows
// than ranks leaves some parts empty.
TEST(DataLoader, ShardsSplitEachBatchAndSeeEverySampleOnce) {
  const int64_t n = 103;  // the last batch of 16 has 7 rows: 3 ranks of 2-3 rows, 8 of 0-1
  auto ds = indexed_dataset(n);
  LoaderOptions base;
  base.batch_size = 16;
  base.seed = 5;
  base.workers = 0;
  DataLoader whole(ds, base);
  const std::vector<Batch> reference = epoch(whole, 2);
  for (int ranks : {1, 3, 8}) {
    SCOPED_TRACE(testing::Message() << ranks << " ranks");
    std::vector<std::vector<Batch>> parts;
    for (int r = 0; r < ranks; ++r) {
      LoaderOptions o = base;
      o.shard_rank = r;
      o.shard_count = ranks;
      o.workers = r % 2;  // threads or not: the same batches
      DataLoader loader(ds, o);
      EXPECT_EQ(loader.batches_per_epoch(), whole.batches_per_epoch());
      parts.push_back(epoch(loader, 2));
    }
    std::vector<int64_t> seen;
    for (size_t b = 0; b < reference.size(); ++b) {
      std::vector<int64_t> joined, labels;
      for (int r = 0; r < ranks; ++r) {
        ASSERT_EQ(parts[size_t(r)].size(), reference.size());
        const Batch& part = parts[size_t(r)][b];
        EXPECT_EQ(part.index, int64_t(b));
        const std::vector<int64_t> ids = sample_ids(part);
        joined.insert(joined.end(), ids.begin(), ids.end());
        const std::vector<int64_t> l = part.labels.to_vector<int64_t>();
        labels.insert(labels.end(), l.begin(), l.end());
      }
      EXPECT_EQ(joined, sample_ids(reference[b])) << "batch " << b;
      EXPECT_EQ(labels, reference[b].labels.to_vector<int64_t>()) << "batch " << b;
      seen.insert(seen.end(), joined.begin(), joined.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), int64_t(0));
    EXPECT_EQ(seen, all);
  }
  LoaderOptions bad = base;
  bad.shard_rank = 3;
  bad.shard_count = 3;
  EXPECT_THROW(DataLoader(ds, bad), Error);
}

// LoaderOptions::mirror: each batch also carries its images with the flip toggled and the crop
// kept: for an unaugmented loader the images reversed along the width, for an augmented one
// the mirror of each augmented image.
TEST(DataLoader, MirroredBatchesAreTheImagesWithTheFlipToggled) {
  auto ds = indexed_dataset(37);
  for (bool augment : {false, true})
    for (int64_t cutout : {0, 1, 2}) {
      SCOPED_TRACE(testing::Message()
                   << (augment ? "augmented" : "plain") << ", cutout " << cutout);
      LoaderOptions o;
      o.batch_size = 8;
      o.seed = 3;
      o.augment = augment;
      o.transform.crop_padding = 1;
      o.transform.flip = true;
      o.transform.cutout = cutout;
      o.mirror = true;
      o.workers = 1;
      DataLoader loader(ds, o);
      const ImageTransform t(o.transform, kH, kW, kC);
      for (const Batch& b : epoch(loader, 1)) {
        ASSERT_TRUE(b.mirrored.defined());
        ASSERT_EQ(b.mirrored.shape(), b.images.shape());
        const std::vector<float> images = b.images.to_vector<float>();
        const std::vector<float> mirrored = b.mirrored.to_vector<float>();
        const std::vector<int64_t> order = epoch_order(37, true, 3, 1);
        for (int64_t j = 0; j < b.images.size(0); ++j) {
          const int64_t sample = order[size_t(b.index * 8 + j)];
          const Augmentation a = augment ? t.draw(3, 1, sample) : Augmentation{};
          std::vector<float> want(size_t(kH * kW * kC));
          t.apply(ds->image(sample), t.mirrored(a), want.data());
          const auto* got = mirrored.data() + j * kH * kW * kC;
          EXPECT_EQ(std::vector<float>(got, got + kH * kW * kC), want) << "sample " << sample;
          // The image read right to left, its cutout square included.
          for (int64_t y = 0; y < kH; ++y)
            for (int64_t x = 0; x < kW; ++x)
              for (int64_t c = 0; c < kC; ++c)
                EXPECT_EQ(got[(y * kW + x) * kC + c],
                          images[size_t(((j * kH + y) * kW + (kW - 1 - x)) * kC + c)]);
        }
      }
    }
  LoaderOptions plain;
  plain.workers = 0;
  DataLoader without(ds, plain);
  without.start_epoch(0);
  EXPECT_FALSE(without.next()->mirrored.defined());
}

// The dataset held by a DeviceResidentSet on the CPU (ops::gather_batch's reference kernel)
// gives the host loader's batches bit for bit, augmented with crop, flip and cutout (odd and
// even sides), or with TrivialAugmentWide, colour jitter and random erasing (the resident set's
// three-op path), mirrored too: the augmentations reach the ops as the loader applies them.
TEST(DataLoader, GatheredBatchesAreTheLoaderBatches) {
  auto ds = std::make_shared<const ImageDataset>(
      make_synthetic(53, 12, 10, 3, 10, /*seed=*/8, Split::Train));
  for (bool augment : {false, true})
    for (int64_t cutout : {0, 5, 6, -1}) {
      SCOPED_TRACE(testing::Message()
                   << (augment ? "augmented" : "plain") << ", cutout " << cutout);
      LoaderOptions o;
      o.batch_size = 16;
      o.seed = 6;
      o.augment = augment;
      o.mirror = true;
      o.transform = default_transform("cifar10");  // mean/std, crop padding 4, flip
      o.transform.cutout = std::max<int64_t>(cutout, 0);
      if (cutout < 0) {  // a program a sample, and an erased rectangle
        o.transform.auto_augment.policy = AutoAugment::TrivialAugmentWide;
        o.transform.color_jitter = {
            .brightness = 0.4, .contrast = 0.4, .saturation = 0.4, .hue = 0.1};
        o.transform.random_erasing = 0.5;
      }
      o.workers = 2;
      DataLoader loader(ds, o);
      const ImageTransform t(o.transform, 12, 10, 3);
      DeviceResidentSet resident(*ds, t, Device::cpu());
      for (int64_t e : {0, 3}) {
        const std::vector<int64_t> order = epoch_order(53, true, 6, e);
        resident.start_epoch(order, t, augment, true, 6, e);
        for (const Batch& b : epoch(loader, e)) {
          const int64_t begin = b.index * 16, count = b.images.size(0);
          const Batch g = resident.batch(e, b.index, begin, count, true);
          ASSERT_EQ(g.labels.to_vector<int64_t>(), b.labels.to_vector<int64_t>());
          ASSERT_EQ(g.images.to_vector<float>(), b.images.to_vector<float>())
              << "epoch " << e << " batch " << b.index;
          ASSERT_EQ(g.mirrored.to_vector<float>(), b.mirrored.to_vector<float>())
              << "mirrored, epoch " << e << " batch " << b.index;
        }
      }
    }
}

// BatchPixels::Uint8: batches of uint8 pixel values (crop padding and cutout 0), which
// model_images normalises through the transform's table on the CPU (gather_batch's reference
// kernel) to the f32 batches of BatchPixels::Normalized bit for bit, mirrored ones too. Auto is
// Uint8 exactly when batches go to a host_allocator's memory.
TEST(DataLoader, Uint8BatchesNormaliseToTheF32Batches) {
  auto ds = std::make_shared<const ImageDataset>(
      make_synthetic(37, 12, 10, 3, 10, /*seed=*/8, Split::Train));
  for (bool augment : {false, true}) {
    SCOPED_TRACE(augment ? "augmented" : "plain");
    LoaderOptions o;
    o.batch_size = 8;
    o.seed = 6;
    o.augment = augment;
    o.mirror = true;
    o.transform = default_transform("cifar10");
    o.transform.cutout = 5;
    o.workers = 2;
    LoaderOptions u = o;
    u.pixels = BatchPixels::Uint8;
    DataLoader f32(ds, o), u8(ds, u);
    EXPECT_EQ(f32.pixels(), BatchPixels::Normalized);
    EXPECT_EQ(u8.pixels(), BatchPixels::Uint8);
    for (int64_t e : {0, 2}) {
      const std::vector<Batch> want = epoch(f32, e), got = epoch(u8, e);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].images.dtype(), DType::U8);
        ASSERT_EQ(got[i].mirrored.dtype(), DType::U8);
        ASSERT_EQ(got[i].labels.to_vector<int64_t>(), want[i].labels.to_vector<int64_t>());
        const Tensor images = u8.model_images(got[i].images, Device::cpu());
        ASSERT_EQ(images.dtype(), DType::F32);
        ASSERT_EQ(images.shape(), want[i].images.shape());
        ASSERT_EQ(images.to_vector<float>(), want[i].images.to_vector<float>())
            << "epoch " << e << " batch " << i;
        ASSERT_EQ(u8.model_images(got[i].mirrored, Device::cpu()).to_vector<float>(),
                  want[i].mirrored.to_vector<float>())
            << "mirrored, epoch " << e << " batch " << i;
        // f32 batches pass through unchanged.
        ASSERT_EQ(f32.model_images(want[i].images, Device::cpu()).to_vector<float>(),
                  want[i].images.to_vector<float>());
      }
    }
  }
  LoaderOptions pinned;
  pinned.host_allocator = [](const Shape& shape, DType dtype) {
    return Tensor::empty(shape, dtype);
  };
  EXPECT_EQ(DataLoader(ds, pinned).pixels(), BatchPixels::Uint8);
  pinned.pixels = BatchPixels::Normalized;
  EXPECT_EQ(DataLoader(ds, pinned).pixels(), BatchPixels::Normalized);
  EXPECT_EQ(DataLoader(ds, LoaderOptions{}).pixels(), BatchPixels::Normalized);
}

TEST(DataLoader, BatchShapesAndPartialLastBatch) {
  DataLoader loader(indexed_dataset(100), {.batch_size = 32, .shuffle = false});
  EXPECT_EQ(loader.batches_per_epoch(), 4);
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 4u);
  const int64_t sizes[] = {32, 32, 32, 4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(batches[i].images.shape(), (Shape{sizes[i], kH, kW, kC}));
    EXPECT_EQ(batches[i].images.dtype(), DType::F32);
    EXPECT_EQ(batches[i].labels.shape(), (Shape{sizes[i]}));
    EXPECT_EQ(batches[i].labels.dtype(), DType::I64);
    EXPECT_EQ(batches[i].index, int64_t(i));
    EXPECT_EQ(batches[i].epoch, 0);
  }
  // Unshuffled: samples in order, labels paired with their images.
  const auto ids = sample_ids(batches[3]);
  EXPECT_EQ(ids, (std::vector<int64_t>{96, 97, 98, 99}));
  EXPECT_EQ(batches[3].labels.to_vector<int64_t>(), (std::vector<int64_t>{6, 7, 8, 9}));
  // The epoch stays finished.
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_FALSE(loader.next().has_value());
}

TEST(DataLoader, DropLastDropsOnlyAPartialBatch) {
  DataLoader drop(indexed_dataset(100), {.batch_size = 32, .drop_last = true});
  EXPECT_EQ(drop.batches_per_epoch(), 3);
  const auto batches = epoch(drop, 0);
  ASSERT_EQ(batches.size(), 3u);
  for (const Batch& b : batches) EXPECT_EQ(b.images.size(0), 32);
  DataLoader exact(indexed_dataset(96), {.batch_size = 32, .drop_last = true});
  EXPECT_EQ(exact.batches_per_epoch(), 3);
  DataLoader tiny(indexed_dataset(5), {.batch_size = 8, .drop_last = true});
  EXPECT_EQ(tiny.batches_per_epoch(), 0);
  EXPECT_TRUE(epoch(tiny, 0).empty());
}

TEST(DataLoader, EverySampleExactlyOncePerEpoch) {
  const int64_t n = 1000;
  DataLoader loader(indexed_dataset(n),
                    {.batch_size = 64, .shuffle = true, .seed = 3, .workers = 2});
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<int> seen(size_t(n), 0);
    for (const Batch& b : epoch(loader, e)) {
      const auto ids = sample_ids(b);
      const auto labels = b.labels.to_vector<int64_t>();
      for (size_t j = 0; j < ids.size(); ++j) {
        ASSERT_LT(ids[j], n);
        ++seen[size_t(ids[j])];
        EXPECT_EQ(labels[j], ids[j] % 10) << "label not paired with its image";
      }
    }
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "sample " << i;
  }
}

TEST(DataLoader, ShuffleIsAPureFunctionOfSeedAndEpoch) {
  const int64_t n = 500;
  EXPECT_EQ(epoch_order(n, true, 9, 4), epoch_order(n, true, 9, 4));
  EXPECT_NE(epoch_order(n, true, 9, 4), epoch_order(n, true, 9, 5));
  EXPECT_NE(epoch_order(n, true, 9, 4), epoch_order(n, true, 10, 4));
  std::vector<int64_t> identity(n);
  for (int64_t i = 0; i < n; ++i) identity[size_t(i)] = i;
  EXPECT_EQ(epoch_order(n, false, 9, 4), identity);
  EXPECT_NE(epoch_order(n, true, 9, 0), identity);

  // Two loaders with one seed agree; the order of the batches follows epoch_order.
  auto ds = indexed_dataset(n);
  DataLoader a(ds, {.batch_size = 50, .seed = 9});
  DataLoader b(ds, {.batch_size = 50, .seed = 9, .workers = 0});
  expect_same_batches(epoch(a, 4), epoch(b, 4));
  std::vector<int64_t> order;
  for (const Batch& batch : epoch(a, 4)) {
    for (int64_t id : sample_ids(batch)) order.push_back(id);
  }
  EXPECT_EQ(order, epoch_order(n, true, 9, 4));
}

LoaderOptions augmenting(int workers) {
  return {.batch_size = 24,
          .shuffle = true,
          .seed = 77,
          .transform = {.crop_padding = 1, .flip = true, .mean = {0.4f, 0.6f}, .std = {0.3f}},
          .augment = true,
          .workers = workers,
          .prefetch = 2};
}

TEST(DataLoader, SameBatchesWithAnyWorkerCount) {
  auto ds = indexed_dataset(250);
  DataLoader sync(ds, augmenting(0));
  DataLoader one(ds, augmenting(1));
  DataLoader three(ds, augmenting(3));
  for (int64_t e = 0; e < 2; ++e) {
    const auto ref = epoch(sync, e);
    ASSERT_EQ(ref.size(), 11u);
    expect_same_batches(ref, epoch(one, e));
    expect_same_batches(ref, epoch(three, e));
    // make_batch builds the same batch on the calling thread.
    expect_same_batches({ref[5]}, {three.make_batch(e, 5)});
  }
  // Augmentation really happened: the epochs differ beyond the shuffle.
  DataLoader plain(ds, {.batch_size = 24, .seed = 77, .transform = augmenting(0).transform});
  EXPECT_NE(epoch(plain, 0)[0].images.to_vector<float>(),
            epoch(sync, 0)[0].images.to_vector<float>());
}

TEST(DataLoader, AugmentationDependsOnTheSampleNotTheBatch) {
  // One sample gets the same augmented image whatever batch size carries it.
  auto ds = indexed_dataset(60);
  LoaderOptions small = augmenting(2), big = augmenting(2);
  small.shuffle = big.shuffle = false;
  small.batch_size = 7;
  big.batch_size = 60;
  DataLoader a(ds, small), b(ds, big);
  std::vector<float> concat;
  for (const Batch& batch : epoch(a, 1)) {
    const auto v = batch.images.to_vector<float>();
    concat.insert(concat.end(), v.begin(), v.end());
  }
  EXPECT_EQ(concat, epoch(b, 1)[0].images.to_vector<float>());
}

TEST(DataLoader, ResumeMidEpochYieldsTheRemainingBatches) {
  auto ds = indexed_dataset(230);
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ds, augmenting(workers));
    const auto full = epoch(loader, 2);
    const int64_t total = loader.batches_per_epoch();
    for (int64_t k : {int64_t(1), int64_t(4), total - 1, total}) {
      const auto rest = epoch(loader, 2, k);
      expect_same_batches(std::vector<Batch>(full.begin() + k, full.end()), rest);
    }
  }
}

TEST(DataLoader, RestartAndDestroyMidEpochStopCleanly) {
  auto ds = indexed_dataset(2000);
  LoaderOptions opt = augmenting(3);
  opt.prefetch = 1;
  for (int round = 0; round < 30; ++round) {
    DataLoader loader(ds, opt);
    loader.start_epoch(0);
    for (int i = 0; i < round % 4; ++i) ASSERT_TRUE(loader.next().has_value());
    loader.start_epoch(1, round % 5);  // abandons epoch 0 with workers busy or blocked
    auto b = loader.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->epoch, 1);
    EXPECT_EQ(b->index, round % 5);
    // The loader is destroyed here with its workers mid-epoch.
  }
  // A loader never started, or started and never read, also stops cleanly.
  { DataLoader idle(ds, opt); }
  {
    DataLoader unread(ds, opt);
    unread.start_epoch(0);
  }
}

TEST(DataLoader, WorkerErrorsReachNext) {
  auto ds = indexed_dataset(300);
  Allocator& cpu = allocator_for(Device::cpu());
  for (int workers : {0, 2}) {
    DataLoader loader(ds, {.batch_size = 100, .workers = workers});
    // Room for nothing: the first batch's tensors cannot be allocated.
    cpu.set_limit(cpu.stats().in_use + 64);
    loader.start_epoch(0);
    bool threw = false;
    try {
      loader.next();
    } catch (const Error& e) {
      threw = true;
      EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << e.one_line();
    }
    EXPECT_TRUE(threw) << "workers " << workers;
    if (workers > 0) {
      // The failure is sticky until the next start_epoch.
      EXPECT_THROW(loader.next(), Error);
    }
    cpu.set_limit(0);
    loader.start_epoch(0);
    EXPECT_EQ(drain(loader).size(), 3u);
  }
}

TEST(DataLoader, RejectsBadUse) {
  auto ds = indexed_dataset(10);
  EXPECT_TRUE(fails_with([&] { DataLoader(ds, {.batch_size = 0}); }, {"batch_size", "0"}));
  EXPECT_TRUE(fails_with([&] { DataLoader(ds, {.workers = -1}); }, {"workers", "-1"}));
  EXPECT_TRUE(fails_with([&] { DataLoader(ds, {.prefetch = 0}); }, {"prefetch"}));
  EXPECT_TRUE(fails_with([&] { DataLoader(nullptr, {}); }, {"null"}));
  EXPECT_TRUE(fails_with(
      [&] {
        DataLoader(ds, {.transform = {.mean = {0.1f, 0.2f, 0.3f}}});
      },
      {"mean", "2 channels"}));
  auto bad = std::make_shared<ImageDataset>(*ds);
  bad->labels[3] = 10;
  EXPECT_TRUE(fails_with([&] { DataLoader(bad, {}); }, {"label 10", "index 3", "10 classes"}));
  bad = std::make_shared<ImageDataset>(*ds);
  bad->pixels.pop_back();
  EXPECT_TRUE(fails_with([&] { DataLoader(bad, {}); }, {"pixel bytes"}));

  DataLoader loader(ds, {.batch_size = 4});
  EXPECT_TRUE(fails_with([&] { loader.next(); }, {"start_epoch"}));
  EXPECT_TRUE(fails_with([&] { loader.start_epoch(0, 4); }, {"first batch 4", "3 batches"}));
  EXPECT_TRUE(fails_with([&] { loader.start_epoch(-1); }, {"epoch", "-1"}));
  EXPECT_TRUE(fails_with([&] { loader.make_batch(0, 3); }, {"batch 3"}));
}

TEST(DataLoader, CifarShapedSyntheticEndToEnd) {
  // A synthetic CIFAR-shaped set through the whole path: u8 HWC in, normalised f32 NHWC out.
  auto ds = std::make_shared<const ImageDataset>(make_synthetic(300, 32, 32, 3, 10, 5));
  LoaderOptions opt{.batch_size = 128,
                    .transform = default_transform("synthetic"),
                    .augment = true,
                    .workers = 2};
  DataLoader loader(ds, opt);
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].images.shape(), (Shape{128, 32, 32, 3}));
  EXPECT_EQ(batches[2].images.shape(), (Shape{44, 32, 32, 3}));
  double sum = 0, sq = 0;
  const auto v = batches[0].images.to_vector<float>();
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x, sq += double(x) * x;
  }
  // Normalised to roughly zero mean and unit spread.
  const double mean = sum / double(v.size());
  EXPECT_LT(std::abs(mean), 0.5);
  EXPECT_GT(sq / double(v.size()) - mean * mean, 0.3);
}

}  // namespace
}  // namespace hg::data
