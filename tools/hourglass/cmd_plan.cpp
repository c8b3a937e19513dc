// hourglass plan CONFIG.toml [--set ...] [--budget 200h] [--price-table FILE]
//                           [--calibrate-steps 20] [--images-per-s X]
// Estimates what a run costs before it starts: time per epoch, epochs the budget buys, time
// and cost of the configured epochs, and the same on each platform of a price table.
// The throughput is measured by running the config's training step on this machine (real
// data through the real loader, after warm-up) unless --images-per-s gives it; with progressive
// resizing (data.image_size_ramp) at each image size, weighted by the epochs it trains.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "budget_flags.h"
#include "commands.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/base/duration.h"
#include "hourglass/base/log.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/plural.h"
#include "hourglass/obs/progress.h"
#include "hourglass/train/evaluate.h"
#include "hourglass/train/plan.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/training_setup.h"

namespace hg::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Measured {
  double train_images_per_s = 0;
  double eval_images_per_s = 0;
  double checkpoint_seconds = 0;              // one epoch-end checkpoint
  int64_t train_images = 0, eval_images = 0;  // per epoch
};

// Runs the run's own training step (train::build_training: its precision, determinism and
// micro-batch; the real data through the real loader) for `warmup` untimed and `steps` timed
// steps, then the evaluation, then writes one checkpoint as an epoch's end does.
// Reading a loss value at each end of the timed window waits for the device, so the window
// holds exactly the timed steps.
// The images an epoch evaluates: the validation set (when held out) and the test set.
int64_t evaluated_images(const train::RunParts& parts) {
  return parts.test_set->size() + (parts.validation_set ? parts.validation_set->size() : 0);
}

// With `show`, each stretch that takes a while (the warm-up and timed steps, each evaluation
// pass) has a progress line on stderr, and each phase a log line.
Measured calibrate(const train::RunConfig& run, const Config& config, int warmup, int steps,
                   bool show) {
  if (show) HG_LOG_INFO("plan: setting up the run (data, model, warm-up of its step shapes)");
  train::TrainingSetup setup = train::build_training(run);
  train::TrainStep& step = *setup.step;
  data::DataLoader& loader = *setup.train_loader;
  int64_t epoch = 0;
  auto next_batch = [&] {
    auto batch = loader.next();
    if (!batch) {  // a short epoch: continue with the next one
      loader.start_epoch(++epoch);
      batch = loader.next();
    }
    return std::move(*batch);
  };
  auto train_step = [&]() -> int64_t {
    data::Batch batch = next_batch();
    step.run(loader.model_images(batch.images, run.device), batch.labels.to(run.device));
    return batch.labels.size(0);
  };
  setup.parts.model->train();
  // The step's rate from epoch `first`'s batches on (`what` names them in the progress lines).
  auto time_steps = [&](int64_t first, const std::string& what) {
    epoch = first;
    loader.start_epoch(epoch);
    const auto warmup_start = Clock::now();
    {
      obs::ProgressBar progress(show && warmup > 0, "plan: warm-up" + what, warmup);
      for (int i = 0; i < warmup; ++i) {
        train_step();
        if (progress.wants_update(i + 1)) progress.update(i + 1, {});
      }
      if (step.last_loss().defined()) (void)step.last_loss().item();
      if (show && warmup > 0)
        progress.finish(fmt::format("done: {} in {:.1f} s", plural(warmup, "step"),
                                    seconds_since(warmup_start)));
    }
    obs::ProgressBar progress(show, "plan: training" + what, steps);
    int64_t images = 0;
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) {
      images += train_step();
      if (progress.wants_update(i + 1)) progress.update(i + 1, {});
    }
    (void)step.last_loss().item();
    const double train_seconds = seconds_since(start);
    if (show)
      progress.finish(fmt::format("done: {} in {:.1f} s, {:.1f} images/s",
                                  plural(steps, "timed step"), train_seconds,
                                  double(images) / train_seconds));
    return double(images) / train_seconds;
  };

  Measured m;
  m.train_images = setup.parts.train_set->size();
  m.eval_images = evaluated_images(setup.parts);
  const data::ImageSizeRamp& ramp = run.data.image_size_ramp;
  if (!ramp.enabled()) {
    m.train_images_per_s = time_steps(0, "");
  } else {
    // Progressive resizing: each size timed from its first epoch, and the run's rate the one
    // that trains all its epochs in the time their sizes' rates give.
    std::map<int64_t, double> rate;        // images/s per side
    std::map<int64_t, int64_t> epochs_at;  // epochs per side
    for (int64_t e = 0; e < run.train.epochs; ++e) {
      const int64_t side = ramp.side_at(e);
      if (epochs_at[side]++ == 0) rate[side] = time_steps(e, fmt::format(" at {}px", side));
    }
    double seconds = 0;  // per training image, over the run
    for (const auto& [side, epochs] : epochs_at) {
      seconds += double(epochs) / rate[side];
      HG_LOG_INFO("plan: training at {}x{}: {:.1f} images/s, {}", side, side, rate[side],
                  plural(epochs, "epoch"));
    }
    m.train_images_per_s = double(run.train.epochs) / seconds;
  }

  // Evaluation as each epoch runs it (train::evaluate over the whole test set), the second of
  // two passes (the first pays for algorithm searches of the last, shorter batch). A test set
  // too large to pass over twice is sampled: one warm-up batch, then five timed ones.
  nn::Module& model = *setup.parts.model;
  constexpr int64_t kWholePassLimit = 20000;
  if (m.eval_images <= kWholePassLimit) {
    train::EvalResult r;
    for (int pass = 1; pass <= 2; ++pass) {
      obs::ProgressBar progress(show, fmt::format("plan: evaluation pass {} of 2", pass),
                                setup.test_loader->batches_per_epoch());
      r = train::evaluate(model, *setup.test_loader, step.context(), nullptr, &progress);
      if (show)
        progress.finish(fmt::format("done: {} in {:.1f} s", plural(r.samples, "image"), r.seconds));
    }
    m.eval_images_per_s = r.seconds > 0 ? double(r.samples) / r.seconds : 0;
  } else {
    if (show) HG_LOG_INFO("plan: timing the evaluation on 6 batches of the test set");
    model.eval();
    train::ExecutionScope scope(step.context());
    autograd::NoGradGuard no_grad;
    setup.test_loader->start_epoch(0);
    auto eval_batch = [&]() -> int64_t {
      auto batch = setup.test_loader->next();
      if (!batch) return 0;
      Tensor logits = model.forward(setup.test_loader->model_images(batch->images, run.device));
      (void)logits.narrow(0, 0, 1).narrow(1, 0, 1).item();
      return batch->labels.size(0);
    };
    eval_batch();
    int64_t eval_images = 0;
    const auto eval_start = Clock::now();
    for (int i = 0; i < 5; ++i) eval_images += eval_batch();
    const double eval_seconds = seconds_since(eval_start);
    m.eval_images_per_s =
        eval_images > 0 && eval_seconds > 0 ? double(eval_images) / eval_seconds : 0;
  }

  // The checkpoint each epoch ends with: the same file, written the same way, in a scratch
  // folder beside the runs (the file system a run writes to), then removed. The step loop
  // waits only for the checkpoint's image (host copies of the tensors); the file is written
  // beside the next steps (RunSession::write_checkpoint), so the image is what an epoch pays.
  const std::filesystem::path scratch =
      std::filesystem::path("runs") / fmt::format(".plan-{}", ::getpid());
  std::error_code ec;
  std::filesystem::create_directories(scratch, ec);
  if (!ec) {
    if (show) HG_LOG_INFO("plan: timing a checkpoint write");
    train::TrainingState state;
    state.step = setup.optimizer->step_count();
    const auto t0 = Clock::now();
    try {
      const train::CheckpointImage image =
          train::training_checkpoint_image(model, *setup.optimizer, config, state);
      const double image_seconds = seconds_since(t0);
      train::save_checkpoint_image((scratch / "probe.safetensors").string(), image);
      m.checkpoint_seconds = image_seconds;
    } catch (const Error& e) {
      HG_LOG_WARN("plan: could not time a checkpoint write in {}: {}", scratch.string(),
                  e.message());
    }
    std::filesystem::remove_all(scratch, ec);
    std::filesystem::path runs = scratch.parent_path();
    if (std::filesystem::is_empty(runs, ec)) std::filesystem::remove(runs, ec);
  }
  return m;
}

// Training and test images per epoch without loading the data, for a given throughput.
// Moves the share data.val_fraction holds out (about: the hold-out rounds per class) from the
// training images to the evaluated ones.
Measured with_validation(const train::RunConfig& run, Measured m) {
  const auto held = int64_t(std::llround(run.data.val_fraction * double(m.train_images)));
  m.train_images -= held;
  m.eval_images += held;
  return m;
}

Measured sizes_without_loading(const train::RunConfig& run) {
  Measured m;
  if (run.data.dataset == "synthetic") {
    m.train_images = run.data.synthetic.synthetic_train_size;
    m.eval_images = run.data.synthetic.synthetic_test_size;
    if (run.data.train_limit > 0) m.train_images = std::min(m.train_images, run.data.train_limit);
    if (run.data.test_limit > 0) m.eval_images = std::min(m.eval_images, run.data.test_limit);
    return with_validation(run, m);
  }
  m.train_images = train::standard_split_size(run.data.dataset, true, run.data.train_limit);
  m.eval_images = train::standard_split_size(run.data.dataset, false, run.data.test_limit);
  if (m.train_images == 0 || m.eval_images == 0) {  // an unknown size: load to count
    const train::RunParts parts = train::build_run_parts(run, true);
    m.train_images = parts.train_set->size();
    m.eval_images = evaluated_images(parts);
    return m;
  }
  return with_validation(run, m);
}

std::string limits_text(const train::BudgetLimits& l) {
  std::string text;
  if (l.device_hours > 0) text = fmt::format("{:.2f} device-hours", l.device_hours);
  if (l.usd > 0) text += fmt::format("{}${:.2f}", text.empty() ? "" : " and ", l.usd);
  return text;
}

}  // namespace

Runner add_plan(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    train::BudgetFlags budget;
    std::string price_table;
    int calibrate_steps = 20, warmup_steps = 3;
    double images_per_s = 0, eval_images_per_s = 0;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "plan",
      "Estimate time and cost of a config against a budget: measures the training step "
      "on this machine (or takes --images-per-s) and compares the platforms of a price "
      "table.");
  sub->add_option("config", a->config, "run configuration (see configs/)")->required();
  sub->add_option("--set", a->overrides, "override a config key, e.g. --set train.epochs=30");
  add_budget_flags(sub, a->budget, /*with_session=*/false);
  sub->add_option("--price-table", a->price_table,
                  "platforms to compare (.toml or .csv; see configs/prices.example.toml)");
  sub->add_option("--calibrate-steps", a->calibrate_steps, "timed training steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sub->add_option("--warmup-steps", a->warmup_steps, "untimed steps before them")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  sub->add_option("--images-per-s", a->images_per_s,
                  "training throughput measured before on this machine; skips calibration")
      ->check(CLI::PositiveNumber);
  sub->add_option("--eval-images-per-s", a->eval_images_per_s,
                  "evaluation throughput (default: measured, or 3x --images-per-s)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--json", a->json,
                "print the plan as one JSON object (the run, this machine's throughput, the "
                "budget and one entry per platform)");
  return [a] {
    Config config = Config::load(a->config);
    for (const auto& o : a->overrides) config.set_override(o);
    const train::RunConfig run = train::parse_run_config(config);
    train::BudgetSettings budget =
        train::resolve_budget_settings(config, a->budget, /*usd_needs_price=*/false);
    config.reject_unused_keys();
    std::vector<train::PricedPlatform> platforms;
    if (!a->price_table.empty())
      platforms = train::load_price_table(a->price_table);
    else
      platforms.push_back({"this-machine", budget.limits.price_per_hour, 1.0});

    // What a shared ledger says was spent comes off the budget; its budget applies when no
    // flag or key set one.
    double spent_seconds = 0, spent_usd = 0;
    train::BudgetLimits& limits = budget.limits;
    if (!budget.ledger_path.empty() && std::filesystem::exists(budget.ledger_path)) {
      const train::LedgerData ledger = train::read_ledger(budget.ledger_path);
      if (!limits.has_limit()) {
        limits.device_hours = ledger.budget_device_hours;
        limits.usd = ledger.budget_usd;
      }
      spent_seconds = ledger.spent_device_seconds();
      spent_usd = ledger.spent_usd();
    }

    Measured m;
    std::string source;
    if (a->images_per_s > 0) {
      m = sizes_without_loading(run);
      m.train_images_per_s = a->images_per_s;
      source = "given";
    } else {
      if (run.threads > 0) set_num_threads(run.threads);
      HG_LOG_INFO("calibrating: {} and {} of {} (batch {}) on {}, then the evaluation",
                  plural(a->warmup_steps, "warm-up step"),
                  plural(a->calibrate_steps, "timed training step"), run.model.name,
                  run.train.batch_size, run.device.str());
      m = calibrate(run, config, a->warmup_steps, a->calibrate_steps, progress_wanted());
      source = fmt::format("measured over {} steps", a->calibrate_steps);
    }
    if (a->eval_images_per_s > 0) m.eval_images_per_s = a->eval_images_per_s;

    train::PlanInput in;
    in.train_images = m.train_images;
    in.eval_images = m.eval_images;
    in.epochs = run.train.epochs;
    in.train_images_per_s = m.train_images_per_s;
    in.eval_images_per_s = m.eval_images_per_s;
    in.reserve_seconds = limits.reserve_seconds;
    in.checkpoint_seconds = m.checkpoint_seconds;
    // A limit already used up stays a (tiny) limit rather than turning into "none" (0).
    constexpr double kUsedUp = 1e-12;
    if (limits.device_hours > 0)
      in.budget_device_hours = std::max(kUsedUp, limits.device_hours - spent_seconds / 3600.0);
    if (limits.usd > 0) in.budget_usd = std::max(kUsedUp, limits.usd - spent_usd);

    const int64_t steps_per_epoch =
        (m.train_images + run.train.batch_size - 1) / run.train.batch_size;
    if (a->json) {
      nlohmann::json platforms_json = nlohmann::json::array();
      for (const auto& p : platforms) {
        const train::PlatformPlan plan = train::plan_platform(in, p);
        nlohmann::json entry = {{"platform", p.name},
                                {"price_per_hour", p.price_per_hour},
                                {"relative_speed", p.relative_speed},
                                {"seconds_per_epoch", plan.seconds_per_epoch},
                                {"seconds", plan.seconds},
                                {"device_hours", plan.device_hours},
                                {"cost_usd", plan.cost},
                                {"fits", plan.fits}};
        entry["epochs_in_budget"] = plan.epochs_in_budget == INT64_MAX
                                        ? nlohmann::json()
                                        : nlohmann::json(plan.epochs_in_budget);
        platforms_json.push_back(std::move(entry));
      }
      const nlohmann::json out = {{"run", run.name},
                                  {"model", run.model.name},
                                  {"dataset", run.data.dataset},
                                  {"train_images", m.train_images},
                                  {"test_images", m.eval_images},
                                  {"batch_size", run.train.batch_size},
                                  {"steps_per_epoch", steps_per_epoch},
                                  {"epochs", run.train.epochs},
                                  {"train_images_per_s", in.train_images_per_s},
                                  {"train_images_per_s_source", source},
                                  {"eval_images_per_s", in.effective_eval_images_per_s()},
                                  {"checkpoint_seconds", in.checkpoint_seconds},
                                  {"budget_device_hours", limits.device_hours},
                                  {"budget_usd", limits.usd},
                                  {"spent_device_hours", spent_seconds / 3600.0},
                                  {"spent_usd", spent_usd},
                                  {"reserve_seconds", limits.reserve_seconds},
                                  {"platforms", platforms_json}};
      std::printf("%s\n", out.dump(2).c_str());
      return 0;
    }
    std::printf(
        "plan for %s: %s on %s, %lld training / %lld test images, batch %lld "
        "(%lld steps per epoch), %lld epochs\n",
        run.name.c_str(), run.model.name.c_str(), run.data.dataset.c_str(),
        (long long)m.train_images, (long long)m.eval_images, (long long)run.train.batch_size,
        (long long)steps_per_epoch, (long long)run.train.epochs);
    std::printf("this machine: %.0f images/s training (%s), %.0f images/s evaluation%s\n",
                in.train_images_per_s, source.c_str(), in.effective_eval_images_per_s(),
                in.eval_images_per_s > 0 ? "" : " (assumed 3x training)");
    {
      const train::PlatformPlan here = train::plan_platform(in, {"this-machine", 0, 1.0});
      const double train_s = double(in.train_images) / in.train_images_per_s;
      const double eval_s = double(in.eval_images) / in.effective_eval_images_per_s();
      std::printf(
          "epoch on this machine: %.2f s (training %.2f s, evaluation %.2f s, "
          "checkpoint %.2f s)\n",
          here.seconds_per_epoch, train_s, eval_s, in.checkpoint_seconds);
    }
    if (in.has_budget()) {
      std::printf("budget: %s", limits_text(limits).c_str());
      if (spent_seconds > 0 || spent_usd > 0)
        std::printf(", of which %.2f device-hours and $%.2f already spent (ledger %s)",
                    spent_seconds / 3600.0, spent_usd, budget.ledger_path.c_str());
      std::printf("; %s kept in reserve for the final save and eval\n",
                  format_duration_clock(limits.reserve_seconds).c_str());
    } else {
      std::printf("budget: none given (--budget 200h, or --budget-usd 170)\n");
    }
    if (!a->price_table.empty()) std::printf("prices: %s\n", a->price_table.c_str());
    std::printf("\n");
    std::vector<train::PlatformPlan> plans;
    for (const auto& p : platforms) plans.push_back(train::plan_platform(in, p));
    std::printf("%s", train::format_plan_table(plans, in.has_budget()).c_str());
    std::printf(
        "\nhours: device-hours on one device of the platform, for training and the "
        "evaluation and checkpoint after each epoch (start-up not included)\n");
    return 0;
  };
}

}  // namespace hg::cli
