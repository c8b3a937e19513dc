// Building what a run computes with from its config: the datasets and the model, the flat
// parameter arena, the optimizer and schedule, the loaders and the TrainStep. The trainer and
// `hourglass plan` both build through here, so plan times the very step the run will take
// (its precision, determinism and micro-batch).
#pragma once

#include <memory>

#include "hourglass/data/loader.h"
#include "hourglass/nn/module.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/optim/schedule.h"
#include "hourglass/tensor/batch_mover.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/step/train_step.h"

namespace hg::train {

// The datasets and model a run's config describes (shared by train and eval): in-memory
// datasets as data::InMemorySource, image files (data.dataset = "folder") as
// data::ImageFileSource.
// Where the start-up's time went (seconds; for the run log and bench/first_step.sh).
struct StartupTimes {
  double begun_after_process_start = 0;  // when the datasets began to load
  double data = 0;  // the datasets read (and decompressed, held out), on their own thread when
                    // the model was built beside them
  // The model built and initialised on the host, then (once the device's start-up,
  // Backend::prepare, is done) moved to the device.
  double model = 0;
  double step = 0;     // the training step made (micro-batch and recompute probes)
  double warm_up = 0;  // the step's shapes run once (train.warm_up), all of it
  int64_t warm_up_shapes = 0;
  double data_wait = 0;  // then waiting for the datasets still loading
  double loaders = 0;    // the loaders made (a device-resident dataset uploaded)
  double ready_after_process_start = 0;
};

struct RunParts {
  std::shared_ptr<const data::SampleSource> train_set, test_set;
  // Held out of the training set (data.val_fraction > 0); null without validation.
  std::shared_ptr<const data::SampleSource> validation_set;
  std::shared_ptr<nn::Module> model;
  StartupTimes startup;
};
// Sets the process's tuning cache from [tune] (ops/tuning_cache.h). Loads or opens the datasets
// (the train set, and the validation set held out of it, only
// when `with_train`) and builds the model, initialised from the run's seed, on the run's
// device.
RunParts build_run_parts(const RunConfig& run, bool with_train);
// The training loader over `set`: shuffled, augmented as configured. Batches built on the host
// for a GPU run go into `mover`'s pinned memory when one is given.
// This process's part of each batch in a data-parallel run (LoaderOptions::shard_rank/count).
struct Shard {
  int rank = 0;
  int count = 1;
};
// With `batch_norm` (the model has batch-norm layers), an epoch's last batch that would give
// some rank a single row, on which batch norm cannot train (one value per channel where the
// feature map is 1x1), is dropped each epoch, and the log says so once: a run whose data leaves
// such a batch can still finish.
std::unique_ptr<data::DataLoader> make_train_loader(const RunConfig& run,
                                                    std::shared_ptr<const data::SampleSource> set,
                                                    std::shared_ptr<BatchMover> mover = nullptr,
                                                    Shard shard = {}, bool batch_norm = false);
// A loader over `set` for evaluation (no shuffle, no augmentation).
std::unique_ptr<data::DataLoader> make_eval_loader(const RunConfig& run,
                                                   std::shared_ptr<const data::SampleSource> set,
                                                   std::shared_ptr<BatchMover> mover = nullptr,
                                                   Shard shard = {});
// The training set's batches as the training loader draws them (shuffled, augmented), built on
// the host whatever data.placement says (a dataset held on the device is not uploaded twice):
// what train.ema_batch_norm = "recompute" runs the averaged weights on.
std::unique_ptr<data::DataLoader> make_batch_norm_loader(
    const RunConfig& run, std::shared_ptr<const data::SampleSource> set,
    std::shared_ptr<BatchMover> mover, Shard shard);

// The configured optimizer (optim.name) over `flat`.
std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& run, FlatParameters flat);

struct TrainingSetup {
  RunParts parts;
  // Moves host-built batches to the run's device (declared before the loaders, whose batches
  // may live in its pinned memory, so that it outlives them).
  std::shared_ptr<BatchMover> mover;
  FlatParameters flat;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LrSchedule> schedule;
  std::unique_ptr<data::DataLoader> train_loader, test_loader;
  std::unique_ptr<data::DataLoader> validation_loader;  // null without validation
  // train.ema_batch_norm = "recompute": the training batches the moving average's batch-norm
  // statistics are recomputed on (make_batch_norm_loader); null otherwise.
  std::unique_ptr<data::DataLoader> batch_norm_loader;
  std::unique_ptr<TrainStep> step;
  int64_t steps_per_epoch = 0, total_steps = 0;
  // The epoch train_loader was started on from its first batch (TrainLoaderStart), or -1.
  int64_t train_loader_epoch = -1;
};

// Whether build_training starts the training loader on epoch 0 before its last warm-up, so that
// the workers build the first batches while the step's shapes run (a trainer that begins
// elsewhere, resuming, starts it again), or leaves it to the caller.
enum class TrainLoaderStart { ByCaller, BeforeWarmUp };
// Builds everything for training `run`, as rank `shard.rank` of `shard.count` (every loader
// sharded; the step sized for this rank's part of a batch). train.micro_batch = "auto" is
// resolved here by probing the step (find_max_micro_batch). With train.warm_up, the step runs
// every batch shape of an epoch once (warm_up.h); where the datasets' shape is known before
// their pixels are read (data::peek_dataset_shape), the model, the step and the warm-up are
// built and run while the datasets load on a thread of their own.
TrainingSetup build_training(const RunConfig& run, Shard shard = {},
                             TrainLoaderStart loader_start = TrainLoaderStart::ByCaller);

}  // namespace hg::train
