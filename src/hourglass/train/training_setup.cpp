#include "hourglass/train/training_setup.h"

#include <fmt/ranges.h>

#include <chrono>
#include <exception>
#include <future>
#include <optional>

#include "hourglass/base/duration.h"
#include "hourglass/base/log.h"
#include "hourglass/data/holdout.h"
#include "hourglass/data/image_split.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/nn/torch_layout.h"
#include "hourglass/ops/backend.h"
#include "hourglass/ops/tuning_cache.h"
#include "hourglass/optim/adamw.h"
#include "hourglass/optim/lamb.h"
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
  o.eval_antialias = run.data.eval_antialias;
  o.limit = run.data.test_limit;
  auto test_set = data::open_image_split(run.data.path, data::Split::Test, o);
  if (with_train) {
    o.limit = run.data.train_limit;
    o.ramp = run.data.image_size_ramp;  // progressive resizing: training images only
    auto train_set = data::open_image_split(run.data.path, data::Split::Train, o);
    o.ramp = {};
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

// The datasets of a run, loaded (in-memory datasets) or opened (image files), and how long that
// took.
struct LoadedData {
  RunParts parts;  // the datasets only
  double seconds = 0;
};

LoadedData load_data(const RunConfig& run, bool with_train) {
  const auto start = std::chrono::steady_clock::now();
  LoadedData d;
  d.parts = run.data.dataset == data::kImageFolderDataset ? image_file_parts(run, with_train)
                                                          : in_memory_parts(run, with_train);
  d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return d;
}

// The device's start-up (a GPU's context, stream and library handles: a few tenths of a second)
// on a thread of its own, begun now; invalid on the CPU.
std::future<void> prepare_device(const RunConfig& run) {
  if (run.device.is_cpu()) return {};
  return std::async(std::launch::async,
                    [device = run.device] { backend_for(device).prepare(device); });
}

// The model for samples of `shape`, initialised from the run's seed on the host (while the
// device may still be starting), then moved to the run's device once `device_ready` is.
std::shared_ptr<nn::Module> build_model(const RunConfig& run, const data::DatasetShape& shape,
                                        std::future<void>& device_ready) {
  nn::ModelSpec spec = run.model;
  spec.in_channels = shape.channels;
  spec.height = shape.height;
  spec.width = shape.width;
  spec.num_classes = shape.num_classes;
  std::shared_ptr<nn::Module> model = nn::make_model(spec);
  nn::initialize(*model, run.seed);
  if (!run.init.from.empty()) {
    nn::check_torch_layout_model(run.model.name);
    const int64_t copied =
        nn::init_from_file(*model, run.model.name, run.init.from, run.init.exclude);
    HG_LOG_INFO("model.init_from {}: {} tensors copied{}", run.init.from, copied,
                run.init.exclude.empty() ? ""
                                         : fmt::format(", {} kept at the seed's values",
                                                       fmt::join(run.init.exclude, ", ")));
  }
  if (device_ready.valid()) device_ready.get();  // its error, if any, is the run's
  model->to(run.device);
  return model;
}

data::DatasetShape shape_of(const data::SampleSource& source) {
  data::DatasetShape s;
  s.height = source.height();
  s.width = source.width();
  s.channels = source.channels();
  s.num_classes = source.num_classes();
  s.size = source.size();
  return s;
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

RunParts build_run_parts(const RunConfig& run, bool with_train) {
  // The tuning cache's settings are the process's: every run built here reads them.
  ops::configure_tuning_cache(run.tune.cache, ops::resolve_tuning_cache_dir(run.tune.cache_dir));
  std::future<void> device_ready = prepare_device(run);
  const double begun = seconds_since_process_start();
  LoadedData loaded = load_data(run, with_train);
  RunParts parts = std::move(loaded.parts);
  parts.startup.begun_after_process_start = begun;
  parts.startup.data = loaded.seconds;
  const auto mark = std::chrono::steady_clock::now();
  parts.model = build_model(run, shape_of(*parts.test_set), device_ready);
  parts.startup.model = seconds_between(mark, std::chrono::steady_clock::now());
  return parts;
}

namespace {

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
  o.max_unreadable = run.data.max_unreadable;
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
                                                    std::shared_ptr<BatchMover> mover, Shard shard,
                                                    bool batch_norm) {
  HG_CHECK(set != nullptr, "make_train_loader: no dataset");
  data::LoaderOptions o = loader_options(run, *set, run.train.batch_size, true, mover, shard);
  // The last batch's rows split over the ranks: below two a rank, some rank gets one (or none).
  const int64_t last = set->size() % run.train.batch_size;
  if (batch_norm && last > 0 && last < 2 * int64_t(shard.count)) {
    o.drop_last = true;
    if (shard.rank == 0)
      HG_LOG_INFO(
          "the {} training samples leave a last batch of {} (train.batch_size {}{}), too few "
          "rows for batch norm to train on: each epoch leaves that batch out (other samples "
          "each epoch, as shuffled)",
          set->size(), last, run.train.batch_size,
          shard.count > 1 ? fmt::format(", over {} ranks", shard.count) : std::string());
  }
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

std::unique_ptr<data::DataLoader> make_batch_norm_loader(
    const RunConfig& run, std::shared_ptr<const data::SampleSource> set,
    std::shared_ptr<BatchMover> mover, Shard shard) {
  HG_CHECK(set != nullptr, "make_batch_norm_loader: no dataset");
  RunConfig host = run;
  host.data.placement = "host";
  data::LoaderOptions o = loader_options(host, *set, run.train.batch_size, true, mover, shard);
  return std::make_unique<data::DataLoader>(std::move(set), std::move(o));
}

std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& run, FlatParameters flat) {
  if (run.optim.name == "sgd") return std::make_unique<optim::Sgd>(std::move(flat), run.optim.sgd);
  if (run.optim.name == "lars")
    return std::make_unique<optim::Sgd>(std::move(flat), run.optim.sgd, run.optim.lars);
  if (run.optim.name == "lamb")
    return std::make_unique<optim::Lamb>(std::move(flat), run.optim.adamw,
                                         run.optim.lars.trust_clip);
  return std::make_unique<optim::AdamW>(std::move(flat), run.optim.adamw);
}

namespace {

// Whether train.warm_up runs the step's shapes before the first epoch on this run.
bool warms_up(const RunConfig& run) {
  return run.train.warm_up == WarmUpMode::On ||
         (run.train.warm_up == WarmUpMode::Auto && run.device.is_gpu());
}

// The shape the model is built for (the test split's) and the training split's size, told
// before the datasets are read (data::peek_dataset_shape); nullopt for image folders (opening
// them is quick: their files are decoded as they train) and where it cannot be told.
struct EarlyShape {
  data::DatasetShape test;
  int64_t train_size = -1;  // -1: not known before reading (a held-out validation split)
};
std::optional<EarlyShape> shape_before_loading(const RunConfig& run) {
  if (run.data.dataset == data::kImageFolderDataset) return std::nullopt;
  data::DatasetOptions test_opts = run.data.synthetic, train_opts = run.data.synthetic;
  test_opts.limit = run.data.test_limit;
  train_opts.limit = run.data.train_limit;
  const auto test =
      data::peek_dataset_shape(run.data.dataset, run.data.path, data::Split::Test, test_opts);
  const auto train =
      data::peek_dataset_shape(run.data.dataset, run.data.path, data::Split::Train, train_opts);
  if (!test || !train) return std::nullopt;
  EarlyShape e{*test, train->size};
  if (run.data.val_fraction > 0) e.train_size = -1;
  return e;
}

// This rank's part of a global batch of `rows` (LoaderOptions' sharding).
int64_t rank_part(int64_t rows, Shard shard) {
  return rows * (shard.rank + 1) / shard.count - rows * shard.rank / shard.count;
}

// This rank's parts of the full and the last batch of an epoch of `size` samples in batches of
// `batch` (nothing for an unknown size).
std::vector<int64_t> batch_parts(int64_t size, int64_t batch, Shard shard) {
  std::vector<int64_t> rows;
  if (size < 0) return rows;
  if (size >= batch) rows.push_back(rank_part(batch, shard));
  if (size % batch != 0) rows.push_back(rank_part(size % batch, shard));
  return rows;
}

// The same from a loader: the rows of its first and last batches.
std::vector<int64_t> loader_parts(const data::DataLoader* loader, Shard shard) {
  std::vector<int64_t> rows;
  if (loader == nullptr || loader->batches_per_epoch() == 0) return rows;
  rows.push_back(rank_part(loader->global_rows(0), shard));
  rows.push_back(rank_part(loader->global_rows(loader->batches_per_epoch() - 1), shard));
  return rows;
}

}  // namespace

TrainingSetup build_training(const RunConfig& run, Shard shard, TrainLoaderStart loader_start) {
  const ExecutionContext context = ExecutionContext::from_run(run);
  if (run.train.batch_size < shard.count)
    throw_invalid(
        fmt::format("train.batch_size = {} is smaller than the {} ranks of this job, "
                    "which each take a part of every batch",
                    run.train.batch_size, shard.count),
        fmt::format("set train.batch_size to at least {} (the global batch)", shard.count));
  ops::configure_tuning_cache(run.tune.cache, ops::resolve_tuning_cache_dir(run.tune.cache_dir));
  std::future<void> device_ready = prepare_device(run);
  const double begun = seconds_since_process_start();
  const bool warm = warms_up(run);
  // Where the datasets' shape is known before their pixels are read, the model and the step are
  // built and warmed up while they load; otherwise the datasets come first.
  const std::optional<EarlyShape> early = warm ? shape_before_loading(run) : std::nullopt;
  std::future<LoadedData> loading = std::async(early ? std::launch::async : std::launch::deferred,
                                               [&run] { return load_data(run, true); });
  TrainingSetup s;
  StartupTimes& t = s.parts.startup;
  auto take_data = [&] {
    LoadedData d = loading.get();
    d.parts.startup = t;
    s.parts = std::move(d.parts);
    s.parts.startup.data = d.seconds;
  };
  if (!early) take_data();
  t.begun_after_process_start = begun;
  const data::DatasetShape shape = early ? early->test : shape_of(*s.parts.test_set);

  auto mark = std::chrono::steady_clock::now();
  auto lap = [&mark] {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = seconds_between(mark, now);
    mark = now;
    return seconds;
  };
  std::shared_ptr<nn::Module> model = build_model(run, shape, device_ready);
  t.model = lap();
  s.flat = nn::build_parameter_arena(*model, run.optim.decay_scope);
  s.optimizer = make_optimizer(run, s.flat);
  s.mover = std::make_shared<BatchMover>(run.device);

  StepOptions o;
  o.label_smoothing = run.train.label_smoothing;
  o.mixing = run.train.mixing;
  o.clip_grad_norm = run.train.clip_grad_norm;
  o.graph = run.train.graph;
  const RecomputeConfig& recompute = run.train.recompute;
  if (recompute.mode == RecomputeMode::Modules) {
    // Checked here for the message's origin (the config file and line).
    nn::set_recompute_modules(*model, recompute.modules, recompute.origin);
    o.recompute = recompute.modules;
  }
  const bool auto_micro = run.train.micro_batch == kAutoMicroBatch;
  // This rank's part of a full batch (the first rank's part is never larger than another's).
  const int64_t rank_rows = (run.train.batch_size + shard.count - 1) / shard.count;
  o.micro_batch = auto_micro ? rank_rows : run.train.micro_batch;
  s.step = std::make_unique<TrainStep>(*model, *s.optimizer, context, o);
  const Shape sample{shape.height, shape.width, shape.channels};
  // Before the micro-batch search: recomputing blocks keeps the whole micro-batch (and its
  // batch statistics) where it can.
  if (recompute.mode == RecomputeMode::Auto)
    choose_recompute(*s.step, sample, rank_rows, allocator_for(run.device));
  if (auto_micro) {
    const int64_t micro = find_max_micro_batch(make_training_probe(*s.step, sample, rank_rows),
                                               rank_rows, allocator_for(run.device));
    s.step->micro_batch_plan() = MicroBatchPlan(micro);
    HG_LOG_INFO("train.micro_batch = \"auto\": {} rows per micro-batch fit", micro);
  }
  t.step = lap();
  StepWarmUp warm_up(*s.step);
  WarmUpShapes shapes;
  shapes.sample = sample;
  if (const data::ImageSizeRamp& ramp = run.data.image_size_ramp; ramp.enabled())
    for (const int64_t side : ramp.sides(run.train.epochs))
      shapes.train_samples.push_back(Shape{side, side, shape.channels});
  shapes.eval_flip = run.train.eval_flip;
  if (early) {
    shapes.train_rows = batch_parts(early->train_size, run.train.batch_size, shard);
    shapes.eval_rows = batch_parts(early->test.size, run.train.eval_batch_size, shard);
    if (shapes.train_rows.empty()) shapes.train_rows.push_back(rank_rows);
    if (shapes.eval_rows.empty())
      shapes.eval_rows.push_back(rank_part(run.train.eval_batch_size, shard));
    t.warm_up += warm_up.run(shapes);
    lap();
    take_data();
    t.data_wait = lap();
    const data::DatasetShape loaded = shape_of(*s.parts.test_set);
    HG_CHECK(loaded.height == shape.height && loaded.width == shape.width &&
                 loaded.channels == shape.channels && loaded.num_classes == shape.num_classes,
             "start-up: {} holds {}x{}x{} samples of {} classes, but its headers announced "
             "{}x{}x{} of {}",
             s.parts.test_set->source(), loaded.height, loaded.width, loaded.channels,
             loaded.num_classes, shape.height, shape.width, shape.channels, shape.num_classes);
  }
  s.parts.model = std::move(model);

  s.train_loader =
      make_train_loader(run, s.parts.train_set, s.mover, shard, has_batch_norm(*s.parts.model));
  s.test_loader = make_eval_loader(run, s.parts.test_set, s.mover, shard);
  if (s.parts.validation_set)
    s.validation_loader = make_eval_loader(run, s.parts.validation_set, s.mover, shard);
  if (run.train.ema_decay > 0 && run.train.ema_recompute_batch_norm)
    s.batch_norm_loader = make_batch_norm_loader(run, s.parts.train_set, s.mover, shard);
  t.loaders = lap();
  s.steps_per_epoch = s.train_loader->batches_per_epoch();
  s.total_steps = s.steps_per_epoch * run.train.epochs;
  s.schedule = make_run_schedule(run, s.steps_per_epoch, s.total_steps);
  s.step->set_schedule(s.schedule.get());
  if (loader_start == TrainLoaderStart::BeforeWarmUp) {
    s.train_loader->start_epoch(0);
    s.train_loader_epoch = 0;
  }
  if (warm) {
    // Every shape the loaders will hand out (those warmed up already are skipped).
    shapes.train_rows = loader_parts(s.train_loader.get(), shard);
    shapes.eval_rows = loader_parts(s.test_loader.get(), shard);
    for (int64_t rows : loader_parts(s.validation_loader.get(), shard))
      shapes.eval_rows.push_back(rows);
    t.warm_up += warm_up.run(shapes);
    t.warm_up_shapes = warm_up.shapes_run();
  }
  t.ready_after_process_start = seconds_since_process_start();
  return s;
}

}  // namespace hg::train
