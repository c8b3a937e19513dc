// hourglass profile CONFIG [--set key=value ...] [--steps N] [--warmup W] [--trace FILE] [--json]
// [--timing auto|marks|kernels]: times every op of N steady-state training steps of the config
// (after W untimed ones, and the same N steps once without the profiler, to report what it
// costs): each op's device time from the device's record of its kernels (CUPTI, CUDA builds,
// each op's kernels listed under it) or from marks on its device's stream around it (GPU events;
// the host clock on the CPU), summed per op into a table sorted by total with the achieved
// TFLOP/s and GB/s (ops/op_profile.h, obs/op_profile_report.h), beside the measured time of the
// same steps. --trace writes the ops as a Chrome / Perfetto trace
// (chrome://tracing, ui.perfetto.dev). The batches come from the config's training loader and are
// on the device before the timed steps start, so the measured time is the steps' own. On a GPU
// the steps replay as a graph, profiled too where the profiler sees graph nodes (CUPTI with its
// callback subscriber); the output says how the profiled and the unprofiled steps ran, so that
// the profiling cost compares like with like or says it does not.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "hourglass/base/atomic_file.h"
#include "hourglass/base/parallel.h"
#include "hourglass/obs/op_profile_report.h"
#include "hourglass/ops/op_profile.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/training_setup.h"

namespace hg::cli {

Runner add_profile(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    int64_t steps = 20, warmup = 5;
    std::string trace;
    bool json = false;
    std::string timing = "auto";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "profile",
      "Time every op of a config's training steps on its device and print them as a table "
      "(calls, total, mean, min, max, share), beside the measured step time; --trace writes a "
      "Chrome/Perfetto trace.");
  sub->add_option("config", a->config, "run configuration (see configs/)")->required();
  sub->add_option("--set", a->overrides, "override a config key (repeatable)");
  sub->add_option("--steps", a->steps, "profiled steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(100000)));
  sub->add_option("--warmup", a->warmup, "untimed steps first (algorithm searches, caches)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(100000)));
  sub->add_option("--trace", a->trace, "write a Chrome trace JSON file here");
  sub->add_flag("--json", a->json, "print the table as one JSON object");
  sub->add_option("--timing", a->timing,
                  "device times from: auto (kernel activity through CUPTI on CUDA GPUs, else "
                  "marks), marks (events around each op), kernels (CUPTI, else marks)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "marks", "kernels"}));
  return [a] {
    Config config = Config::load(a->config);
    for (const auto& o : a->overrides) config.set_override(o);
    const train::RunConfig run = train::parse_run_config(config);
    // A misspelled key is refused as train refuses it (the budget keys are read, not used).
    (void)train::resolve_budget_settings(config, {}, /*usd_needs_price=*/false);
    config.reject_unused_keys();
    if (run.threads > 0) set_num_threads(run.threads);
    train::TrainingSetup s = train::build_training(run);
    train::TrainStep& step = *s.step;
    s.parts.model->train();
    // The batches of warm-up and profiled steps, on the device before anything is timed.
    std::vector<std::pair<Tensor, Tensor>> batches;
    data::DataLoader& loader = *s.train_loader;
    loader.start_epoch(0);
    for (int64_t i = 0; i < a->warmup + a->steps; ++i) {
      auto b = loader.next();
      if (!b) {
        loader.start_epoch(int64_t(batches.size()));
        b = loader.next();
      }
      batches.emplace_back(loader.model_images(b->images, run.device, s.mover.get()),
                           b->labels.to(run.device));
    }
    for (int64_t i = 0; i < a->warmup; ++i)
      step.run(batches[size_t(i)].first, batches[size_t(i)].second);
    auto sync = [&] {
      if (step.last_loss().defined()) (void)step.last_loss().item();
    };
    // How the last timed steps ran: all replayed, or (some) eager.
    const auto replays = [&] { return step.graph() ? step.graph()->replays() : 0; };
    auto how_ran = [&](int64_t replays_before) {
      return replays() - replays_before == a->steps ? "graph replay" : "eager";
    };
    auto timed_steps = [&] {  // ms per step of the profiled batches
      sync();
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = a->warmup; i < a->warmup + a->steps; ++i)
        step.run(batches[size_t(i)].first, batches[size_t(i)].second);
      sync();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                 .count() /
             double(a->steps);
    };
    const ops::DeviceTiming timing = a->timing == "marks"     ? ops::DeviceTiming::Marks
                                     : a->timing == "kernels" ? ops::DeviceTiming::KernelActivity
                                                              : ops::DeviceTiming::Auto;
    // The same steps without the profiler, before and after the profiled ones (the faster of
    // the two, against drift and late warm-up): what profiling costs. The profiler lives only
    // around its own steps, so that kernel activity (enabled while a collector lives) is off for
    // the others.
    int64_t before = replays();
    double plain_ms = timed_steps();
    std::string plain_ran = how_ran(before);
    double step_ms = 0;
    std::string profiled_ran, eager_why;
    obs::OpProfileSummary summary;
    {
      ops::OpProfiler profiler(run.device, timing);
      // One step recorded and forgotten: it counts the ops, so the device marks are made before
      // the timed steps, and lets the collector settle in (its first launches).
      profiler.install();
      step.run(batches.back().first, batches.back().second);
      profiler.uninstall();
      const int64_t ops_per_step = int64_t(profiler.events().size());
      profiler.clear();
      if (!profiler.uses_kernel_activity())
        profiler.clock().reserve(int(2 * (ops_per_step + 8) * a->steps));
      profiler.install();
      eager_why = step.eager_reason();
      before = replays();
      step_ms = timed_steps();
      profiled_ran = how_ran(before);
      profiler.uninstall();
      summary = obs::summarize(profiler);
      if (!a->trace.empty()) write_file_atomic(a->trace, obs::chrome_trace_json(profiler));
    }
    before = replays();
    const double plain_after_ms = timed_steps();
    if (plain_after_ms < plain_ms) plain_ms = plain_after_ms, plain_ran = how_ran(before);
    if (a->json) {
      const obs::OpProfileSource source{a->config, run.device.str(), a->steps, step_ms,
                                        plain_ms,  profiled_ran,     plain_ran};
      std::printf("%s\n", obs::profile_json(summary, source).c_str());
    } else {
      std::printf("%s", obs::format_table(summary, step_ms, a->steps).c_str());
      std::printf("without the profiler: %.3f ms a step (profiling cost %+.1f%%)\n", plain_ms,
                  100 * (step_ms / plain_ms - 1));
      if (profiled_ran == plain_ran)
        std::printf("steps run as: %s, profiled and not\n", plain_ran.c_str());
      else if (profiled_ran == "eager")
        std::printf(
            "note: the profiled steps ran eagerly%s, the unprofiled ones replayed a "
            "graph, so the cost compares unlike steps\n",
            eager_why.empty() ? "" : (" (" + eager_why + ")").c_str());
      else
        std::printf("note: the profiled steps ran as: %s, the unprofiled ones as: %s\n",
                    profiled_ran.c_str(), plain_ran.c_str());
      if (!a->trace.empty()) std::printf("trace: %s\n", a->trace.c_str());
    }
    return 0;
  };
}

}  // namespace hg::cli
