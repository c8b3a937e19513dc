// hourglass train CONFIG.toml [--set key=value ...] [--run-dir DIR]
#include <chrono>
#include <ctime>

#include "commands.h"
#include "hourglass/base/log.h"
#include "hourglass/train/trainer.h"

namespace hg::cli {

namespace {

std::string default_run_dir(const std::string& name) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + name + "-" + stamp;
}

}  // namespace

Runner add_train(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    std::string run_dir;
    bool no_progress = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train a model from a TOML config. Writes config.toml, metrics.jsonl and "
               "final.safetensors to the run directory.");
  sub->add_option("config", args->config, "run configuration (see configs/)")->required();
  sub->add_option("--set", args->overrides,
                  "override a config key, e.g. --set train.epochs=3 (repeatable)");
  sub->add_option("--run-dir", args->run_dir,
                  "where outputs go (default runs/<config name>-<date-time>)");
  sub->add_flag("--no-progress", args->no_progress, "no progress bar, only per-epoch lines");
  return [args] {
    Config config = Config::load(args->config);
    for (const auto& o : args->overrides) config.set_override(o);
    train::TrainerOptions options;
    options.progress = !args->no_progress;
    options.run_dir = args->run_dir.empty()
                          ? default_run_dir(train::parse_run_config(config).name)
                          : args->run_dir;
    train::Trainer trainer(config, options);
    const auto history = trainer.run();
    const auto& last = history.back();
    std::printf("test accuracy %.4f after %lld epochs (%.0f images/s); outputs in %s\n",
                last.test_acc, static_cast<long long>(last.epoch), last.images_per_s,
                trainer.run_dir().c_str());
    return 0;
  };
}

}  // namespace hg::cli
