#include "hourglass/data/loader.h"

#include <algorithm>
#include <numeric>

#include "hourglass/base/error.h"
#include "hourglass/base/rng.h"
#include "hourglass/ops/ops.h"
#include "hourglass/tensor/batch_mover.h"

namespace hg::data {

namespace {

// Separates the shuffle stream from the augmentation streams of the same seed.
constexpr uint64_t kShuffleTag = 0x53485546464C4500ull;  // "SHUFFLE"
constexpr int kMaxWorkers = 64;
// Rows a worker builds of a batch at least (fewer parts for small batches: each part takes the
// loader's lock twice).
constexpr int64_t kMinPartRows = 8;

// Checks the source before anything reads its shape (argument evaluation order is
// unspecified, so the check cannot sit beside the reads in one call).
ImageTransform make_transform(const std::shared_ptr<const SampleSource>& source,
                              const TransformOptions& options) {
  HG_CHECK(source != nullptr, "DataLoader: the dataset is null");
  return ImageTransform(options, source->height(), source->width(), source->channels());
}

}  // namespace

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  if (!shuffle) {
    std::vector<int64_t> order(size_t(std::max<int64_t>(n, 0)));
    std::iota(order.begin(), order.end(), int64_t(0));
    return order;
  }
  RandomStream rs(seed, mix_stream(uint64_t(epoch), kShuffleTag));
  return random_permutation(n, rs);
}

DataLoader::DataLoader(std::shared_ptr<const SampleSource> source, LoaderOptions options)
    : source_(std::move(source)),
      options_(std::move(options)),
      transform_(make_transform(source_, options_.transform)) {
  HG_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got {}",
           options_.batch_size);
  HG_CHECK(options_.workers >= 0 && options_.workers <= kMaxWorkers,
           "DataLoader: workers must be in [0, {}], got {}", kMaxWorkers, options_.workers);
  HG_CHECK(options_.prefetch >= 1, "DataLoader: prefetch must be >= 1, got {}", options_.prefetch);
  HG_CHECK(options_.shard_count >= 1 && options_.shard_rank >= 0 &&
               options_.shard_rank < options_.shard_count,
           "DataLoader: shard {} of {} is not a rank in [0, shard_count)", options_.shard_rank,
           options_.shard_count);
  window_ = int64_t(options_.prefetch) * std::max(options_.workers, 1);
  pixels_ = options_.pixels;
  if (pixels_ == BatchPixels::Auto)
    pixels_ = options_.host_allocator ? BatchPixels::Uint8 : BatchPixels::Normalized;
  if (options_.placement.is_gpu()) {
    pixels_ = BatchPixels::Normalized;  // gathered and normalised on the device
    // Only pixels held in memory can be uploaded; image files are decoded on the host.
    const auto* memory = dynamic_cast<const InMemorySource*>(source_.get());
    HG_CHECK(memory != nullptr,
             "DataLoader: dataset '{}' ({}) is decoded from files on the host and cannot be "
             "placed on {}",
             source_->name(), source_->source(), options_.placement.str());
    resident_ =
        std::make_unique<DeviceResidentSet>(memory->dataset(), transform_, options_.placement);
  }
}

DataLoader::DataLoader(std::shared_ptr<const ImageDataset> dataset, LoaderOptions options)
    : DataLoader(std::make_shared<const InMemorySource>(std::move(dataset)), std::move(options)) {}

DataLoader::DataLoader(std::nullptr_t, LoaderOptions options)
    : DataLoader(std::shared_ptr<const SampleSource>(), std::move(options)) {}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = source_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

int64_t DataLoader::global_rows(int64_t index) const {
  const int64_t n = source_->size();
  return std::clamp<int64_t>(n - index * options_.batch_size, 0, options_.batch_size);
}

int64_t DataLoader::rank_rows(int64_t index, int64_t* begin) const {
  const int64_t n = source_->size();
  const int64_t global_begin = index * options_.batch_size;
  const int64_t global_count = std::min(options_.batch_size, n - global_begin);
  HG_ASSERT(index >= 0 && global_count > 0, "batch {} is outside the epoch", index);
  // This rank's part of the global batch (all of it without sharding).
  const int64_t ranks = options_.shard_count, rank = options_.shard_rank;
  const int64_t first = global_begin + global_count * rank / ranks;
  if (begin != nullptr) *begin = first;
  return global_begin + global_count * (rank + 1) / ranks - first;
}

Batch DataLoader::allocate(int64_t epoch, int64_t index) const {
  const SampleSource& src = *source_;
  const int64_t count = rank_rows(index);
  Batch batch;
  batch.epoch = epoch;
  batch.index = index;
  auto empty = [&](const Shape& shape, DType dtype) {
    return options_.host_allocator ? options_.host_allocator(shape, dtype)
                                   : Tensor::empty(shape, dtype);
  };
  const DType dtype = pixels_ == BatchPixels::Uint8 ? DType::U8 : DType::F32;
  batch.images = empty({count, src.height_at(epoch), src.width_at(epoch), src.channels()}, dtype);
  if (options_.mirror) batch.mirrored = empty(batch.images.shape(), dtype);
  batch.labels = Tensor::empty({count}, DType::I64);
  return batch;
}

ImageTransform DataLoader::transform_at(int64_t epoch) const {
  const int64_t h = source_->height_at(epoch), w = source_->width_at(epoch);
  if (h == transform_.height() && w == transform_.width()) return transform_;
  return ImageTransform(options_.transform, h, w, source_->channels());
}

void DataLoader::write_rows(Batch& batch, const std::vector<int64_t>& order, int64_t index,
                            int64_t first, int64_t last, const ImageTransform& transform) const {
  const SampleSource& src = *source_;
  const int64_t n = src.size();
  int64_t begin = 0;
  rank_rows(index, &begin);
  const int64_t image_values = batch.images.numel() / std::max<int64_t>(batch.images.size(0), 1);
  int64_t* labels = batch.labels.data<int64_t>();
  const SampleRequest request{options_.seed, batch.epoch, options_.augment, &transform};
  // Serial on purpose, also when called on the consumer's thread: a batch of in-memory images
  // is well under a millisecond of work, less than an OpenMP fork/join costs on a busy machine
  // (measured: an epoch of Fashion-MNIST took 25x longer through parallel_for), and from a
  // worker thread the pool would start a second team of threads beside the compute pool.
  // Sources that decode files get their parallelism from the workers.
  auto write_samples = [&](auto* images, auto* mirrored) {
    for (int64_t j = first; j < last; ++j) {
      auto* out = images + j * image_values;
      auto* out_mirrored = mirrored != nullptr ? mirrored + j * image_values : nullptr;
      // An unreadable sample: the next position of the epoch's order that reads, wrapping.
      int64_t tries = 0;
      while (!src.write(order[size_t((begin + j + tries) % n)], request, out, out_mirrored,
                        labels + j)) {
        if (++tries == n)
          throw_invalid(fmt::format("DataLoader: none of the {} samples of '{}' ({}) can be read",
                                    n, src.name(), src.source()),
                        "the warnings above name each file and what is wrong with it");
        if (const int64_t bad = src.skipped(); double(bad) > options_.max_unreadable * double(n))
          throw_invalid(
              fmt::format("DataLoader: {} of the {} samples of '{}' ({}) are unreadable, more "
                          "than data.max_unreadable = {} allows",
                          bad, n, src.name(), src.source(), options_.max_unreadable),
              "fix or remove the files the warnings above name, or raise data.max_unreadable");
      }
    }
  };
  if (batch.images.dtype() == DType::U8)
    write_samples(batch.images.data<uint8_t>(),
                  options_.mirror ? batch.mirrored.data<uint8_t>() : nullptr);
  else
    write_samples(batch.images.data<float>(),
                  options_.mirror ? batch.mirrored.data<float>() : nullptr);
}

Batch DataLoader::build(int64_t epoch, const std::vector<int64_t>& order, int64_t index) const {
  if (resident_) {
    int64_t begin = 0;
    const int64_t count = rank_rows(index, &begin);
    return resident_->batch(epoch, index, begin, count, options_.mirror);
  }
  Batch batch = allocate(epoch, index);
  if (epoch_transform_ && epoch == epoch_)
    write_rows(batch, order, index, 0, batch.labels.size(0), *epoch_transform_);
  else
    write_rows(batch, order, index, 0, batch.labels.size(0), transform_at(epoch));
  return batch;
}

Tensor DataLoader::model_images(const Tensor& images, Device device, BatchMover* mover) const {
  const Tensor moved = mover != nullptr ? mover->move(images) : images.to(device);
  if (moved.dtype() != DType::U8) return moved;
  if (!table_.defined() || table_.device() != moved.device())
    table_ =
        Tensor::from_vector(transform_.table(), {transform_.channels(), 256}).to(moved.device());
  return ops::gather_batch(moved, Tensor(), Tensor(), Tensor(), table_).images;
}

Batch DataLoader::make_batch(int64_t epoch, int64_t index) const {
  HG_CHECK(index >= 0 && index < batches_per_epoch(),
           "DataLoader: batch {} is outside the epoch's {} batches", index, batches_per_epoch());
  HG_CHECK(!resident_, "DataLoader: make_batch builds host batches; this loader's are on {}",
           options_.placement.str());
  return build(epoch, epoch_order(source_->size(), options_.shuffle, options_.seed, epoch), index);
}

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  HG_CHECK(epoch >= 0, "DataLoader: epoch must be >= 0, got {}", epoch);
  HG_CHECK(first_batch >= 0 && first_batch <= batches_per_epoch(),
           "DataLoader: first batch {} is outside the epoch's {} batches", first_batch,
           batches_per_epoch());
  stop_workers();
  // No worker runs now, so the epoch state can be rewritten without the lock.
  started_ = true;
  epoch_ = epoch;
  order_ = epoch_order(source_->size(), options_.shuffle, options_.seed, epoch);
  epoch_transform_ = transform_at(epoch);
  end_ = batches_per_epoch();
  next_claim_ = first_batch;
  next_part_ = 0;
  next_emit_ = first_batch;
  failed_ = nullptr;
  ready_.clear();
  if (resident_) {  // batches are gathered on the device, by next() on the caller's thread
    resident_->start_epoch(order_, transform_, options_.augment, options_.mirror, options_.seed,
                           epoch);
    return;
  }
  if (options_.workers == 0 || first_batch == end_) return;
  try {
    for (int t = 0; t < options_.workers; ++t) threads_.emplace_back([this] { worker_loop(); });
  } catch (...) {
    stop_workers();  // a thread that could not start: join the ones that did, then report
    throw;
  }
}

void DataLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  std::lock_guard lock(mutex_);
  stop_ = false;
  ready_.clear();
  building_.clear();
}

void DataLoader::worker_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_cv_.wait(
        lock, [&] { return stop_ || (next_claim_ < end_ && next_claim_ < next_emit_ + window_); });
    if (stop_) return;
    const int64_t index = next_claim_, part = next_part_;
    std::shared_ptr<Building>& entry = building_[index];
    if (!entry) {
      // Parts of at least kMinPartRows rows, at most one a worker.
      entry = std::make_shared<Building>();
      const int64_t rows = rank_rows(index);
      entry->parts =
          std::clamp<int64_t>((rows + kMinPartRows - 1) / kMinPartRows, 1, options_.workers);
      entry->parts_left = entry->parts;
    }
    const std::shared_ptr<Building> b = entry;
    if (++next_part_ == b->parts) {
      next_part_ = 0;
      ++next_claim_;
    }
    lock.unlock();
    std::exception_ptr error;
    try {
      std::call_once(b->allocated, [&] { b->batch = allocate(epoch_, index); });
      const int64_t rows = b->batch.labels.size(0);
      write_rows(b->batch, order_, index, rows * part / b->parts, rows * (part + 1) / b->parts,
                 *epoch_transform_);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !b->error) b->error = error;
    if (--b->parts_left == 0) {
      Slot slot;
      if (b->error)
        slot.error = b->error;
      else
        slot.batch = std::move(b->batch);
      ready_.emplace(index, std::move(slot));
      building_.erase(index);
      ready_cv_.notify_one();
    }
  }
}

std::optional<Batch> DataLoader::next() {
  HG_CHECK(started_, "DataLoader: next() called before start_epoch()");
  if (failed_) std::rethrow_exception(failed_);
  if (options_.workers == 0 || resident_) {
    if (next_emit_ >= end_) return std::nullopt;
    Batch batch = build(epoch_, order_, next_emit_);
    ++next_emit_;
    return batch;
  }
  std::unique_lock lock(mutex_);
  if (next_emit_ >= end_) return std::nullopt;
  ready_cv_.wait(lock, [&] { return ready_.count(next_emit_) != 0; });
  Slot slot = std::move(ready_.extract(next_emit_).mapped());
  if (slot.error) {
    failed_ = slot.error;
    std::rethrow_exception(failed_);
  }
  ++next_emit_;
  lock.unlock();
  work_cv_.notify_all();  // the window moved: a waiting worker may claim another batch
  return std::move(slot.batch);
}

}  // namespace hg::data
