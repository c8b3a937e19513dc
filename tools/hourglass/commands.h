// The subcommands of the hourglass CLI: each registers its options on a CLI11 app and returns
// the function that runs it. Exit codes: 0 success, 2 bad input (config, flags, files),
// 1 any other failure (I/O, out of memory), 3 (kExitDiverged) a NaN or infinite training loss,
// 70 an internal error, 75 (kExitStopped) training
// stopped on request or by a ledger that cannot be updated, with a checkpoint written (none
// when it stopped before its first step; resume with --resume auto).
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>

#include "hourglass/base/log.h"

namespace hg::cli {

using Runner = std::function<int()>;

// "Stopped, resumable" (EX_TEMPFAIL): a signal, --stop-after, the STOP file or the budget
// ledger ended the run after a checkpoint, or a signal ended it before it trained.
inline constexpr int kExitStopped = 75;
// "Diverged": the training loss became NaN or infinite (ErrorKind::Diverged). The run's last
// checkpoint, written before the loss was found bad, is kept; nothing after it is saved.
inline constexpr int kExitDiverged = 3;

// Whether a long command (bench, plan) shows its progress on stderr: when info log lines are
// shown (--log-level warn hides both). stdout carries only the result either way.
inline bool progress_wanted() { return spdlog::should_log(spdlog::level::info); }

// Seconds from t0 to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Runner add_train(CLI::App& app);
Runner add_eval(CLI::App& app);
// A model's weights for another framework (cmd_export.cpp).
Runner add_export(CLI::App& app);
// A trained ResNet as an INT8 model (cmd_quantize.cpp).
Runner add_quantize(CLI::App& app);
// Classes of image files by a trained or INT8 model (cmd_predict.cpp).
Runner add_predict(CLI::App& app);
Runner add_info(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_plan(CLI::App& app);
Runner add_doctor(CLI::App& app);
Runner add_pack(CLI::App& app);
Runner add_monitor(CLI::App& app);
Runner add_profile(CLI::App& app);
// An HTML report of a run directory (cmd_report.cpp).
Runner add_report(CLI::App& app);
// Fills the tuning cache for a config (cmd_tune.cpp).
Runner add_tune(CLI::App& app);
// N local processes of a subcommand with torchrun's environment (cmd_launch.cpp).
Runner add_launch(CLI::App& app);
// Hidden: prints the launch environment, for the tests of launch (cmd_rank_info.cpp).
Runner add_rank_info(CLI::App& app);
// A bash completion script for the subcommands registered before it (cmd_completion.cpp).
Runner add_completion(CLI::App& app);

}  // namespace hg::cli
