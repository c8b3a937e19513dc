#include "train_rl.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/base/log.h"
#include "hourglass/rl/rl_config.h"
#include "hourglass/rl/rl_trainer.h"
#include "hourglass/train/config/engine_config.h"
#include "print_config.h"

namespace hg::cli {

int train_rl(const Config& config, const TrainRlArgs& args) {
  // Every key read and checked before anything is written.
  const rl::RlRunConfig run = rl::parse_rl_run_config(config);
  train::resolve_budget_settings(config, args.budget);
  config.reject_unused_keys();
  if (args.print_config) {
    print_config(train::with_engine_keys(config, run.engine), rl::rl_trajectory_text(run),
                 args.json);
    return 0;
  }
  rl::RlTrainerOptions options;
  options.run_dir = args.run_dir;
  options.resume = args.resume;
  options.stop_after_steps = args.stop_after;
  options.budget = args.budget;
  struct ClosedLine {
    ~ClosedLine() { log_to_file_only("run closed; the process exits"); }
  } closed_line;
  rl::RlTrainer trainer(config, options);
  add_log_file((std::filesystem::path(trainer.run_dir()) / "train.log").string());
  const rl::RlRunSummary s = trainer.run();
  if (args.json) {
    nlohmann::json out = {{"run_dir", s.run_dir},           {"stopped", s.stopped},
                          {"stop_reason", s.stop_reason},   {"step", s.optimizer_steps},
                          {"global_step", s.global_step},   {"iterations", s.iterations},
                          {"checkpoint", s.last_checkpoint}};
    out["last_iteration"] =
        s.last_record.empty() ? nlohmann::json() : nlohmann::json::parse(s.last_record);
    if (!s.stopped) out["eval_return_mean"] = s.eval_return_mean;
    std::printf("%s\n", out.dump().c_str());
    return s.stopped ? kExitStopped : 0;
  }
  if (s.stopped) {
    std::printf(
        "stopped (%s) at iteration %lld (%lld environment steps); checkpoint %s; continue with: "
        "hourglass train %s --run-dir %s --resume auto%s\n",
        s.stop_reason.c_str(), static_cast<long long>(s.iterations),
        static_cast<long long>(s.global_step),
        s.last_checkpoint.empty() ? "none (stopped before the first step)"
                                  : s.last_checkpoint.c_str(),
        args.config_path.c_str(), s.run_dir.c_str(),
        args.overrides.empty() ? "" : " (and the same --set flags)");
    return kExitStopped;
  }
  std::printf(
      "mean return %.1f +- %.1f over 100 greedy episodes after %lld environment steps; "
      "outputs in %s\n",
      s.eval_return_mean, s.eval_return_std, static_cast<long long>(s.global_step),
      s.run_dir.c_str());
  return 0;
}

}  // namespace hg::cli
