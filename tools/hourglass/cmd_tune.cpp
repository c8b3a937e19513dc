// hourglass tune CONFIG [--set key=value ...] [--ranks N] [--json]: fills the tuning cache
// (ops/tuning_cache.h) for a config ahead of its run, so that the run searches nothing. It
// builds the config's model and training step on its device, as `train` does (the micro-batch
// included), and runs every shape the run will: a training step on a full batch and on the
// epoch's last, smaller batch where the training set's size leaves one (at each image size of a
// progressive resizing), and an evaluation
// over the test set (and the validation set), whose batches are the eval batch size and its
// remainder. --ranks N tunes one rank's shapes of an N-rank data-parallel run (its share of
// each batch). Each convolution pass and matrix product that is not yet cached is searched and
// stored. Nothing of the run is written: no run directory, no checkpoint.
#include <chrono>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/ops/tuning_cache.h"
#include "hourglass/train/evaluate.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/training_setup.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/backend/gpu/blas.h"
#include "hourglass/backend/gpu/dnn.h"
#endif

namespace hg::cli {

namespace {

// dnn.h's and blas.h's counts together where there is a GPU backend; zero on CPU builds (oneDNN
// searches nothing).
struct Searches {
  int64_t searched = 0, timed = 0, from_cache = 0;
};
Searches searches_now() {
#ifdef HOURGLASS_HAS_GPU
  const gpu::dnn::SearchCounts c = gpu::dnn::search_counts();
  const gpu::blas::SearchCounts b = gpu::blas::search_counts();
  return Searches{c.searched + b.searched, c.timed + b.timed, c.from_cache + b.from_cache};
#else
  return {};
#endif
}

}  // namespace

Runner add_tune(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    int ranks = 1;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "tune",
      "Fill the tuning cache for a config ahead of its run: run its training step and "
      "evaluation once on its device, at every batch size the run uses, so that every "
      "algorithm search (cuDNN's convolutions) runs now and is saved; the run then searches "
      "nothing. The cache is $HOURGLASS_CACHE_DIR, else tune.cache_dir, else "
      "$XDG_CACHE_HOME/hourglass (~/.cache/hourglass).");
  sub->add_option("config", a->config, "run configuration (see configs/)")->required();
  sub->add_option("--set", a->overrides, "override a config key (repeatable)");
  sub->add_option("--ranks", a->ranks,
                  "tune the shapes of one rank of a data-parallel run of this many ranks (each "
                  "rank's batch is its share of train.batch_size)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  sub->add_flag("--json", a->json, "print the result as one JSON object");
  return [a] {
    Config config = Config::load(a->config);
    for (const auto& o : a->overrides) config.set_override(o);
    train::RunConfig run = train::parse_run_config(config);
    // Filling the cache is the point: on, unless the config says otherwise itself.
    if (!config.has("tune.cache")) run.tune.cache = ops::TuningCacheMode::ReadWrite;
    // A misspelled key is refused as train refuses it (the budget keys are read, not used).
    (void)train::resolve_budget_settings(config, {}, /*usd_needs_price=*/false);
    config.reject_unused_keys();
    if (run.threads > 0) set_num_threads(run.threads);
    const auto start = std::chrono::steady_clock::now();
    const Searches before = searches_now();
    const ops::TuningCacheCounts cache_before = ops::tuning_cache_counts();
    // (A micro-batch of "auto" is probed here, with steps whose searches count too.)
    train::TrainingSetup s = train::build_training(run, train::Shard{0, a->ranks});
    const ops::TuningCacheSettings cache = ops::tuning_cache_settings();
    if (cache.mode != ops::TuningCacheMode::ReadWrite || cache.dir.empty())
      HG_LOG_WARN("the tuning cache is {}{}: the searches run, but nothing is saved",
                  cache.dir.empty() ? "without a folder" : "",
                  cache.dir.empty() ? "" : ops::tuning_cache_mode_name(cache.mode));

    // The training shapes: the first batch, and the epoch's last when it is smaller, of the
    // first epoch of each image size (one, unless the images are resized progressively).
    train::TrainStep& step = *s.step;
    s.parts.model->train();
    data::DataLoader& loader = *s.train_loader;
    std::set<Shape> train_shapes;
    std::vector<int64_t> train_rows;  // of each shape run, in order
    auto run_batch = [&](int64_t epoch, int64_t first_batch) {
      loader.start_epoch(epoch, first_batch);
      auto b = loader.next();
      if (!b) return;
      if (!train_shapes.insert(b->images.shape()).second) return;
      step.run(loader.model_images(b->images, run.device, s.mover.get()), b->labels.to(run.device));
      train_rows.push_back(b->labels.size(0));
    };
    std::set<int64_t> sides;
    for (int64_t epoch = 0; epoch < run.train.epochs; ++epoch) {
      if (!sides.insert(loader.source().height_at(epoch)).second) continue;
      run_batch(epoch, 0);
      if (loader.batches_per_epoch() > 1) run_batch(epoch, loader.batches_per_epoch() - 1);
    }
    // The evaluation shapes: the run's evaluations over the same loaders.
    int64_t eval_samples = 0;
    for (data::DataLoader* eval : {s.validation_loader.get(), s.test_loader.get()})
      if (eval != nullptr)
        eval_samples +=
            train::evaluate(*s.parts.model, *eval, step.context(), s.mover.get()).samples;
    if (step.last_loss().defined()) (void)step.last_loss().item();  // the device is done

    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Searches after = searches_now();
    const ops::TuningCacheCounts cache_after = ops::tuning_cache_counts();
    const int64_t searched = after.searched - before.searched;
    const int64_t timed = after.timed - before.timed;
    const int64_t from_cache = after.from_cache - before.from_cache;
    const int64_t stored = cache_after.stored - cache_before.stored;
    const int64_t rejected = cache_after.rejected - cache_before.rejected;
    if (a->json) {
      const nlohmann::json out{{"config", a->config},
                               {"device", run.device.str()},
                               {"seconds", seconds},
                               {"train_batch_rows", train_rows},
                               {"eval_samples", eval_samples},
                               {"searched", searched},
                               {"timed", timed},
                               {"from_cache", from_cache},
                               {"stored", stored},
                               {"rejected", rejected},
                               {"cache_mode", ops::tuning_cache_mode_name(cache.mode)},
                               {"cache_dir", cache.dir}};
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf(
          "tuned %s on %s in %.2f s (training batches of %zu shape%s, %lld evaluation samples): "
          "%lld passes and products searched (%lld candidates timed), %lld already cached; "
          "%lld entries stored in %s (tune.cache = %s)%s\n",
          a->config.c_str(), run.device.str().c_str(), seconds, train_rows.size(),
          train_rows.size() == 1 ? "" : "s", (long long)eval_samples, (long long)searched,
          (long long)timed, (long long)from_cache, (long long)stored,
          cache.dir.empty() ? "(no folder)" : cache.dir.c_str(),
          ops::tuning_cache_mode_name(cache.mode),
          run.device.is_cpu() ? "; the cpu backend has no searches to cache" : "");
    }
    return 0;
  };
}

}  // namespace hg::cli
