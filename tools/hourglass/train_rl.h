// `hourglass train` of a config with an [rl] table: the RL trainer (rl/rl_trainer.h) in the run
// directory, with the same flags as a supervised run.
#pragma once

#include <string>
#include <vector>

#include "hourglass/base/config.h"
#include "hourglass/train/run/budget.h"

namespace hg::cli {

struct TrainRlArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string run_dir;  // chosen already (cmd_train.cpp: choose_run_dir)
  std::string resume;
  int64_t stop_after = 0;
  bool print_config = false;
  bool json = false;
  train::BudgetFlags budget;
};

// Runs it; returns the process's exit code (0, or kExitStopped).
int train_rl(const Config& config, const TrainRlArgs& args);

}  // namespace hg::cli
