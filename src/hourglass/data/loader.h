// DataLoader: turns a SampleSource (an ImageDataset held in memory, or image files decoded as
// they are read) into NHWC batches, optionally shuffled and augmented, prepared ahead of the
// consumer by background threads: normalised f32, or uint8 pixel values that model_images()
// normalises on the device the model runs on (BatchPixels).
//
// Determinism: the epoch's order is a pure function of (seed, epoch) and each sample's
// augmentation a pure function of (seed, epoch, sample index), so batch k of epoch e holds the
// same values whatever the worker count, and a run resumed with start_epoch(e, k) continues
// exactly where it stopped.
//
// Threads: workers are std::threads that block on condition variables (they never spin: the
// machine's cores belong to the OpenMP compute pool). A batch is built in parts of at least 8
// rows, at most one per worker, which the workers claim in order (batch by batch, part by
// part), so the first batch of an epoch is ready after one worker's share of it rather than
// after one worker has built all of it (a batch of 256 JPEGs takes a worker about 0.4 s on the
// H200 host: a 50-step epoch waited that long at its start); claims run at most `prefetch`
// batches per worker ahead of the consumer, and next() hands batches out strictly in index
// order. A worker's exception is rethrown by next() when the consumer reaches that batch. One
// thread uses a DataLoader (calls start_epoch / next).
//
// Unreadable samples (a corrupt image file): the batch position takes the next sample of the
// epoch's order that reads (wrapping around), so a batch is still a pure function of (seed,
// epoch, index) and of which files are readable, never a zero image. The source reports each
// unreadable file once; skipped_samples() counts them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "hourglass/data/dataset.h"
#include "hourglass/data/device_resident.h"
#include "hourglass/data/sample_source.h"
#include "hourglass/data/transforms.h"
#include "hourglass/tensor/tensor.h"

namespace hg {
class BatchMover;
}

namespace hg::data {

// How a host loader's batches hold their images.
enum class BatchPixels {
  // Uint8 when batches are built in host_allocator's memory (a GPU run's pinned buffers, bound
  // for the device), else Normalized.
  Auto,
  // f32, normalised by the workers (ImageTransform's scale and bias).
  Normalized,
  // uint8 pixel values (SampleSource's second write()): a quarter of the bytes for the workers
  // to write and for the copy to move; model_images() normalises them through the transform's
  // table where the model runs (ops::gather_batch), the values Normalized gives for whole pixel
  // values. In-memory datasets give Normalized's floats bit for bit; resized image files are
  // rounded to whole pixel values first.
  Uint8,
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = false;  // drop the last batch when it is smaller than batch_size
  uint64_t seed = 0;
  TransformOptions transform;
  bool augment = false;  // apply crop, flip and cutout (training); normalisation always applies
  // Each batch also carries its images mirrored (Batch::mirrored: the same crop, the flip
  // toggled, the cutout square mirrored), for test-time flip averaging.
  bool mirror = false;
  int workers = 1;  // background threads; 0 builds each batch inside next()
  // Unreadable samples (SampleSource::skipped) are replaced by the next readable one until they
  // exceed this share of the source; then building a batch throws InvalidInput, naming the
  // count, rather than retrying most of a broken dataset every epoch.
  double max_unreadable = kDefaultMaxUnreadable;
  int prefetch = 2;  // batches each worker may prepare ahead of the consumer
  // Where batches are built. A GPU: the dataset is uploaded there once and each batch is
  // gathered, augmented and normalised on it (device_resident.h); workers are not used.
  Device placement = Device::cpu();
  // Sharding for data-parallel training: rank `shard_rank` of `shard_count` takes rows
  // [count * rank / N, count * (rank + 1) / N) of each global batch of `count` rows, so the ranks
  // see every sample of an epoch exactly once between them, in the same number of batches, with
  // the augmentations the unsharded loader draws. A part is empty when a (last) batch has fewer
  // rows than there are ranks.
  int shard_rank = 0;
  int shard_count = 1;
  // Allocates the host tensors batches are built in (empty: Tensor::empty). A GPU run passes
  // pinned memory (BatchMover::host_empty), which its copy stream reads without staging.
  std::function<Tensor(const Shape&, DType)> host_allocator;
  // How host batches hold their images (a device placement's are always normalised f32).
  BatchPixels pixels = BatchPixels::Auto;
};

struct Batch {
  // [B, H, W, C] on the loader's placement device: f32, or u8 pixel values (BatchPixels::Uint8,
  // the loader's pixels()); DataLoader::model_images turns either into the model's input.
  Tensor images;
  Tensor labels;    // i64 [B], on the same device
  Tensor mirrored;  // LoaderOptions::mirror: `images` mirrored horizontally; else undefined
  int64_t epoch = 0;
  int64_t index = 0;  // batch index within the epoch
};

// The sample order of an epoch: 0..n-1, or a Fisher-Yates shuffle driven by a Philox stream
// of (seed, epoch) when `shuffle`.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

class DataLoader {
 public:
  // InvalidInput for a null or inconsistent source, batch_size < 1, workers outside [0, 64],
  // prefetch < 1, a shard outside [0, shard_count), or transform options that do not fit the
  // images.
  DataLoader(std::shared_ptr<const SampleSource> source, LoaderOptions options);
  // An ImageDataset through an InMemorySource.
  DataLoader(std::shared_ptr<const ImageDataset> dataset, LoaderOptions options);
  DataLoader(std::nullptr_t, LoaderOptions options);  // InvalidInput: the dataset is null
  ~DataLoader();                                      // stops and joins the workers
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Begins epoch `epoch` at batch `first_batch` (0 <= first_batch <= batches_per_epoch();
  // > 0 resumes mid-epoch). Stops any epoch in progress first, discarding its prepared batches.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);

  // The next batch of the current epoch, or nullopt once the epoch is done. Rethrows a
  // worker's exception (and again on later calls, until the next start_epoch).
  std::optional<Batch> next();

  int64_t batches_per_epoch() const;
  // Rows of batch `index` of an epoch over all shards together (the global batch).
  int64_t global_rows(int64_t index) const;
  // Builds batch `index` of epoch `epoch` on the calling thread, independent of any epoch in
  // progress; next() returns exactly this. Host placement only.
  Batch make_batch(int64_t epoch, int64_t index) const;
  // Bytes of the dataset held on the placement device (0 on the host).
  int64_t device_bytes() const { return resident_ ? resident_->bytes() : 0; }

  // `images` (a batch's images or mirrored images) as the model takes them on `device`: moved
  // there (through `mover` when one is given: its device, BatchMover's rules) and, when they
  // are uint8 pixels (BatchPixels::Uint8), normalised there by ops::gather_batch through the
  // transform's table (kept on the device after the first call). Called by the thread that
  // uses the loader.
  Tensor model_images(const Tensor& images, Device device, BatchMover* mover = nullptr) const;
  // How this loader's batches hold their images (BatchPixels::Auto resolved).
  BatchPixels pixels() const { return pixels_; }

  const SampleSource& source() const { return *source_; }
  const LoaderOptions& options() const { return options_; }
  // Distinct samples found unreadable so far (corrupt image files), all epochs together.
  int64_t skipped_samples() const { return source_->skipped(); }

 private:
  // Prepared batch or the exception its worker hit.
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  // A batch the workers build a part (a run of its samples) each: the epoch's first batch is
  // ready after a worker's share of it, not after one worker has decoded all of it.
  struct Building {
    std::once_flag allocated;
    Batch batch;
    int64_t parts = 1, parts_left = 1;
    std::exception_ptr error;
  };

  Batch build(int64_t epoch, const std::vector<int64_t>& order, int64_t index) const;
  // Batch `index`'s tensors (this rank's rows), not yet written.
  Batch allocate(int64_t epoch, int64_t index) const;
  // Writes rows [first, last) of batch `index` (of this rank's part) into `batch`, through
  // `transform` (the one of the batch's epoch's sample shape).
  void write_rows(Batch& batch, const std::vector<int64_t>& order, int64_t index, int64_t first,
                  int64_t last, const ImageTransform& transform) const;
  // The transform for samples of `epoch`'s shape (a source that resizes per epoch,
  // SampleSource::height_at): transform_, or one of the same options for that shape.
  ImageTransform transform_at(int64_t epoch) const;
  // This rank's rows of batch `index`, and the first of them in the epoch's order.
  int64_t rank_rows(int64_t index, int64_t* begin = nullptr) const;
  void worker_loop();
  void stop_workers();

  std::shared_ptr<const SampleSource> source_;
  LoaderOptions options_;
  ImageTransform transform_;
  BatchPixels pixels_ = BatchPixels::Normalized;
  std::unique_ptr<DeviceResidentSet> resident_;  // device placement only
  mutable Tensor table_;                         // model_images' table, on its last device

  // The current epoch; written only by start_epoch while no worker runs.
  bool started_ = false;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
  int64_t end_ = 0;                                // batches in the epoch
  std::optional<ImageTransform> epoch_transform_;  // transform_at(epoch_)

  std::mutex mutex_;
  std::condition_variable work_cv_;   // workers: a batch may be claimed, or stop
  std::condition_variable ready_cv_;  // consumer: a batch was prepared
  int64_t next_claim_ = 0;            // next batch index a worker will take a part of
  int64_t next_part_ = 0;             // its next part
  std::map<int64_t, std::shared_ptr<Building>> building_;
  int64_t next_emit_ = 0;  // next batch index next() returns
  int64_t window_ = 1;     // how far next_claim_ may run ahead of next_emit_
  bool stop_ = false;
  std::map<int64_t, Slot> ready_;
  std::exception_ptr failed_;  // sticky: the error next() threw this epoch
  std::vector<std::thread> threads_;
};

}  // namespace hg::data
