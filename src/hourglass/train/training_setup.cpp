#include "hourglass/train/training_setup.h"

#include <chrono>
#include <exception>
#include <future>

#include "hourglass/base/duration.h"
#include "hourglass/base/log.h"
#include "hourglass/data/holdout.h"
#include "hourglass/data/image_split.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/ops/backend.h"
#include "hourglass/ops/tuning_cache.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/sgd.h"

namespace hg::train {

namespace {

// The in-memory datasets (IDX, CIFAR-10, synthetic), loaded whole.
RunParts in_memory_parts(const RunConfig& run, bool with_train) {
  RunParts parts;
  std::shared_ptr<const data::ImageDataset> train_set, test_set, validation_set;
  data::DatasetOptions test_opts = run.data.synthetic;
  test_opts.limit = run.data.test_limit;
  auto load_test = [&] {
    auto set = std::make_shared<const data::ImageDataset>(
        data::load_dataset(run.data.dataset, run.data.path, data::Split::Test, test_opts));
    data::require_samples(*set, data::Split::Test);
    return set;
  };
  if (!with_train) {
    test_set = load_test();
  } else {
    // The two splits are read (and decompressed) side by side; the test split's error, if any,
    // is reported first, as when they were read one after the other.
    std::future<std::shared_ptr<const data::ImageDataset>> test_loading =
        std::async(std::launch::async, load_test);
    data::DatasetOptions train_opts = run.data.synthetic;
    train_opts.limit = run.data.train_limit;
    std::exception_ptr train_error;
    try {
      train_set = std::make_shared<const data::ImageDataset>(
          data::load_dataset(run.data.dataset, run.data.path, data::Split::Train, train_opts));
    } catch (...) {
      train_error = std::current_exception();
    }
    test_set = test_loading.get();
    if (train_error) std::rethrow_exception(train_error);
    data::require_samples(*train_set, data::Split::Train);
    // The model is built for the test split's shape; a train split of another shape would
    // reach it only as wrong-sized batches (or, for some models, silently reshaped ones).
    data::require_same_shape(*train_set, *test_set);
    if (run.data.val_fraction > 0) {
      data::HeldOut split = data::hold_out(*train_set, run.data.val_fraction, run.seed);
      if (split.validation.size() == 0 || split.train.size() == 0)
        throw_invalid(fmt::format("data.val_fraction = {} of the {} training samples in {} "
                                  "leaves {} for validation and {} for training",
                                  run.data.val_fraction, train_set->size(), train_set->source,
                                  split.validation.size(), split.train.size()),
                      "raise data.val_fraction, or use more training samples (data.train_limit)");
      train_set = std::make_shared<const data::ImageDataset>(std::move(split.train));
      validation_set = std::make_shared<const data::ImageDataset>(std::move(split.validation));
    }
    if (!run.data.val_path.empty()) {  // a validation set of its own: val_path's test split
      data::DatasetOptions val_opts = run.data.synthetic;
      validation_set = std::make_shared<const data::ImageDataset>(
          data::load_dataset(run.data.dataset, run.data.val_path, data::Split::Test, val_opts));
      data::require_samples(*validation_set, data::Split::Test);
      data::require_same_shape(*train_set, *validation_set);
    }
  }
  auto wrap = [](std::shared_ptr<const data::ImageDataset> ds)
      -> std::shared_ptr<const data::SampleSource> {
    if (!ds) return nullptr;
    return std::make_shared<const data::InMemorySource>(std::move(ds));
  };
  parts.train_set = wrap(train_set);
  parts.test_set = wrap(test_set);
  parts.validation_set = wrap(validation_set);
  return parts;
}

// Image files (data.dataset = "folder"), opened by name and decoded as the loaders read them.
RunParts image_file_parts(const RunConfig& run, bool with_train) {
  RunParts parts;
  data::ImageFileOptions o;
  o.image_size = run.data.image_size;
  o.flip = run.data.transform.flip;
  o.limit = run.data.test_limit;
  auto test_set = data::open_image_split(run.data.path, data::Split::Test, o);
  if (with_train) {
    o.limit = run.data.train_limit;
    auto train_set = data::open_image_split(run.data.path, data::Split::Train, o);
    data::require_same_classes(*train_set, *test_set);
    parts.train_set = train_set;
    if (!run.data.val_path.empty()) {  // a validation set of its own: val_path's val/ or test/
      o.limit = 0;
      auto validation_set = data::open_image_split(run.data.val_path, data::Split::Test, o);
      data::require_same_classes(*train_set, *validation_set);
      parts.validation_set = validation_set;
    }
  }
  parts.test_set = test_set;
  return parts;
}

}  // namespace

RunParts build_run_parts(const RunConfig& run, bool with_train) {
  // The tuning cache's settings are the process's: every run built here reads them.
  ops::configure_tuning_cache(run.tune.cache, ops::resolve_tuning_cache_dir(run.tune.cache_dir));
  // The device's start-up (a GPU's context, stream and library handles: a few tenths of a
  // second) on a thread of its own while the datasets are read and decompressed.
  std::future<void> device_ready;
  if (!run.device.is_cpu())
    device_ready = std::async(std::launch::async,
                              [device = run.device] { backend_for(device).prepare(device); });
  const double begun = seconds_since_process_start();
  auto mark = std::chrono::steady_clock::now();
  auto lap = [&mark] {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - mark).count();
    mark = now;
    return seconds;
  };
  RunParts parts = run.data.dataset == data::kImageFolderDataset ? image_file_parts(run, with_train)
                                                                 : in_memory_parts(run, with_train);
  parts.startup.begun_after_process_start = begun;
  parts.startup.data = lap();
  if (device_ready.valid()) device_ready.get();  // its error, if any, is the run's
  parts.startup.device_wait = lap();
  const data::SampleSource& shape_source = *parts.test_set;
  nn::ModelSpec spec = run.model;
  spec.in_channels = shape_source.channels();
  spec.height = shape_source.height();
  spec.width = shape_source.width();
  spec.num_classes = shape_source.num_classes();
  parts.model = nn::make_model(spec);
  nn::initialize(*parts.model, run.seed);
  parts.model->to(run.device);
  parts.startup.model = lap();
  return parts;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// data.placement resolved for one dataset. Image files (no InMemorySource) are decoded on the
// host; run_config refuses "device" for them.
Device placement_for(const RunConfig& run, const data::SampleSource& source) {
  const auto* memory = dynamic_cast<const data::InMemorySource*>(&source);
  if (run.device.is_cpu() || run.data.placement == "host" || memory == nullptr)
    return Device::cpu();
  if (run.data.placement == "device") return run.device;
  return int64_t(memory->dataset().pixels.size()) <= kAutoDevicePlacementBytes ? run.device
                                                                               : Device::cpu();
}

data::LoaderOptions loader_options(const RunConfig& run, const data::SampleSource& set,
                                   int64_t batch_size, bool training,
                                   const std::shared_ptr<BatchMover>& mover, Shard shard) {
  data::LoaderOptions o;
  o.shard_rank = shard.rank;
  o.shard_count = shard.count;
  o.batch_size = batch_size;
  o.shuffle = training;
  o.augment = training && run.data.augment;
  o.drop_last = false;
  o.seed = run.seed;
  o.transform = run.data.transform;
  o.workers = run.data.workers;
  o.placement = placement_for(run, set);
  if (mover && o.placement.is_cpu() && mover->device().is_gpu())
    o.host_allocator = [mover](const Shape& shape, DType dtype) {
      return mover->host_empty(shape, dtype);
    };
  return o;
}
}  // namespace

std::unique_ptr<data::DataLoader> make_train_loader(const RunConfig& run,
                                                    std::shared_ptr<const data::SampleSource> set,
                                                    std::shared_ptr<BatchMover> mover,
                                                    Shard shard) {
  HG_CHECK(set != nullptr, "make_train_loader: no dataset");
  data::LoaderOptions o = loader_options(run, *set, run.train.batch_size, true, mover, shard);
  return std::make_unique<data::DataLoader>(std::move(set), std::move(o));
}

std::unique_ptr<data::DataLoader> make_eval_loader(const RunConfig& run,
                                                   std::shared_ptr<const data::SampleSource> set,
                                                   std::shared_ptr<BatchMover> mover, Shard shard) {
  HG_CHECK(set != nullptr, "make_eval_loader: no dataset");
  data::LoaderOptions o = loader_options(run, *set, run.train.eval_batch_size, false, mover, shard);
  o.mirror = run.train.eval_flip;
  return std::make_unique<data::DataLoader>(std::move(set), std::move(o));
}

std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& run, FlatParameters flat) {
  if (run.optim.name == "sgd") return std::make_unique<optim::Sgd>(std::move(flat), run.optim.sgd);
  return std::make_unique<optim::AdamW>(std::move(flat), run.optim.adamw);
}

TrainingSetup build_training(const RunConfig& run, Shard shard) {
  const ExecutionContext context = ExecutionContext::from_run(run);
  if (run.train.batch_size < shard.count)
    throw_invalid(
        fmt::format("train.batch_size = {} is smaller than the {} ranks of this job, "
                    "which each take a part of every batch",
                    run.train.batch_size, shard.count),
        fmt::format("set train.batch_size to at least {} (the global batch)", shard.count));
  TrainingSetup s;
  s.parts = build_run_parts(run, true);
  s.flat = nn::build_parameter_arena(*s.parts.model, run.optim.decay_scope);
  s.optimizer = make_optimizer(run, s.flat);
  s.mover = std::make_shared<BatchMover>(run.device);
  const auto loaders_start = std::chrono::steady_clock::now();
  s.train_loader = make_train_loader(run, s.parts.train_set, s.mover, shard);
  s.test_loader = make_eval_loader(run, s.parts.test_set, s.mover, shard);
  if (s.parts.validation_set)
    s.validation_loader = make_eval_loader(run, s.parts.validation_set, s.mover, shard);
  s.parts.startup.loaders = seconds_since(loaders_start);
  s.steps_per_epoch = s.train_loader->batches_per_epoch();
  s.total_steps = s.steps_per_epoch * run.train.epochs;
  s.schedule = make_run_schedule(run, s.steps_per_epoch, s.total_steps);

  StepOptions o;
  o.label_smoothing = run.train.label_smoothing;
  o.clip_grad_norm = run.train.clip_grad_norm;
  o.schedule = s.schedule.get();
  o.graph = run.train.graph;
  const RecomputeConfig& recompute = run.train.recompute;
  if (recompute.mode == RecomputeMode::Modules) {
    // Checked here for the message's origin (the config file and line).
    nn::set_recompute_modules(*s.parts.model, recompute.modules, recompute.origin);
    o.recompute = recompute.modules;
  }
  const bool auto_micro = run.train.micro_batch == kAutoMicroBatch;
  // This rank's part of a full batch (the first rank's part is never larger than another's).
  const int64_t rank_rows = (run.train.batch_size + shard.count - 1) / shard.count;
  o.micro_batch = auto_micro ? rank_rows : run.train.micro_batch;
  const auto step_start = std::chrono::steady_clock::now();
  s.step = std::make_unique<TrainStep>(*s.parts.model, *s.optimizer, context, o);
  const data::SampleSource& set = *s.parts.train_set;
  // Before the micro-batch search: recomputing blocks keeps the whole micro-batch (and its
  // batch statistics) where it can.
  if (recompute.mode == RecomputeMode::Auto)
    choose_recompute(*s.step, {set.height(), set.width(), set.channels()}, rank_rows,
                     allocator_for(run.device));
  if (auto_micro) {
    const int64_t micro = find_max_micro_batch(
        make_training_probe(*s.step, {set.height(), set.width(), set.channels()}, rank_rows),
        rank_rows, allocator_for(run.device));
    s.step->micro_batch_plan() = MicroBatchPlan(micro);
    HG_LOG_INFO("train.micro_batch = \"auto\": {} rows per micro-batch fit", micro);
  }
  s.parts.startup.step = seconds_since(step_start);
  s.parts.startup.ready_after_process_start = seconds_since_process_start();
  return s;
}

}  // namespace hg::train
