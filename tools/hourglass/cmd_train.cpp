// hourglass train CONFIG.toml [--set key=value ...] [--run-dir DIR] [--resume auto|PATH]
//   [--checkpoint-every DURATION] [--checkpoint-every-steps N] [--stop-after N]
//   [--print-config] [--json]
//
// Log lines go to stderr and to <run-dir>/train.log; the result (one line, or with --json one
// JSON object) to stdout.
//
// SIGTERM, SIGINT and SIGUSR1 (stop_signals.h), --stop-after, a file named STOP in the run
// directory and a budget ledger that cannot be updated make the run finish its current step
// (or evaluation), write a checkpoint and exit with kExitStopped; a second SIGINT ends the
// process at once.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include <optional>
#include "budget_flags.h"

#include "commands.h"
#include "hourglass/base/byte_size.h"
#include "hourglass/base/duration.h"
#include "hourglass/base/log.h"
#include "hourglass/base/plural.h"
#include "hourglass/device/device.h"
#include "hourglass/dist/comm.h"
#include "hourglass/dist/launch_env.h"
#include "hourglass/rl/rl_config.h"
#include "hourglass/train/config/engine_config.h"
#include "hourglass/train/trainer.h"
#include "print_config.h"
#include "train_rl.h"

namespace hg::cli {

namespace {

std::string default_run_dir(const std::string& name) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + name + "-" + stamp;
}

// The run directory: --run-dir; for --resume PATH without it, the run directory PATH's
// checkpoints/ folder belongs to; otherwise a new runs/<name>-<date-time>.
std::string choose_run_dir(const std::string& run_dir, const std::string& resume,
                           const std::string& name) {
  if (!run_dir.empty()) return run_dir;
  if (resume == "auto")
    throw_invalid("--resume auto needs --run-dir DIR naming the run to continue",
                  "the default run directory is new for every run; pass the directory the run "
                  "was started with");
  if (!resume.empty()) {
    const std::filesystem::path folder = std::filesystem::path(resume).parent_path();
    if (folder.filename() != "checkpoints")
      throw_invalid(fmt::format("--resume {}: the checkpoint is not in a run's checkpoints/ "
                                "folder, so the run directory is unknown",
                                resume),
                    "pass --run-dir DIR to say where the resumed run writes");
    return folder.parent_path().empty() ? "." : folder.parent_path().string();
  }
  return default_run_dir(name);
}

// Data parallelism: when a launcher (hourglass launch, torchrun, mpirun, srun) started this
// process, the communicator that joins it to the other ranks (train::connect_ranks: NCCL for
// GPUs, the unique id travelling through MPI under mpirun, otherwise through the TCP rendezvous
// at MASTER_ADDR:MASTER_PORT; MPI for CPUs), and the config pointed at this rank's GPU. A
// launcher's single rank takes the same path (the one-rank run that checks it). Null when the
// process was started alone.
std::unique_ptr<Communicator> join_ranks(Config& config) {
  const LaunchEnv env = read_launch_env();
  if (env.source == LaunchSource::SingleProcess) return nullptr;
  Device device = train::parse_run_config(config).device;
  std::unique_ptr<Communicator> comm = train::connect_ranks(env, device);
  if (device.is_gpu()) config.set_override(fmt::format("device=\"{}\"", device.str()));
  // Rank 0 speaks for the job; the others report only warnings and errors.
  if (comm->rank() != 0) set_log_level("warn");
  return comm;
}

}  // namespace

Runner add_train(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    std::string run_dir;
    std::string resume;
    std::string checkpoint_every;
    std::optional<int64_t> checkpoint_every_steps;
    int64_t stop_after = 0;
    bool no_progress = false;
    bool print_config = false;
    bool json = false;
    std::string memory_limit;
    train::BudgetFlags budget;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "train",
      "Train a model from a TOML config. Writes config.toml, metrics.jsonl, checkpoints/ and "
      "final.safetensors to the run directory.\nSIGTERM, SIGINT, SIGUSR1, --stop-after, a "
      "file <run-dir>/STOP and a budget ledger that cannot be updated make the run finish its "
      "step or evaluation, write a checkpoint and exit with code 75 (stopped, resumable: "
      "continue with --resume auto); a signal before the run directory is touched exits 75 "
      "at once with nothing written; a second SIGINT aborts at once.");
  sub->add_option("config", args->config, "run configuration (see configs/)")->required();
  sub->add_option("--set", args->overrides,
                  "override a config key, e.g. --set train.epochs=3 (repeatable)");
  sub->add_option("--run-dir", args->run_dir,
                  "where outputs go (default runs/<config name>-<date-time>; with --resume PATH, "
                  "the run directory holding PATH)");
  sub->add_option("--resume", args->resume,
                  "auto: continue from the newest valid checkpoint in --run-dir (required), or "
                  "start when there is none; PATH: continue from that checkpoint");
  sub->add_option("--checkpoint-every", args->checkpoint_every,
                  "write a checkpoint this often, e.g. 10m, 90s, 1h (overrides checkpoint.every; "
                  "0 = only by steps and at epoch ends)");
  sub->add_option("--checkpoint-every-steps", args->checkpoint_every_steps,
                  "also write a checkpoint every N optimizer steps (overrides "
                  "checkpoint.every_steps; 0 = off)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            return !text.empty() && text[0] != '-' ? std::string()
                                                   : text + " is negative: give 0 (off) or more";
          },
          "N"));
  sub->add_option("--stop-after", args->stop_after,
                  "stop after N optimizer steps of this invocation: checkpoint, exit 75");
  sub->add_option("--memory-limit", args->memory_limit,
                  "hold at most this much device memory, e.g. 8GiB; a step that needs more runs "
                  "out of memory and is retried with half the micro-batch");
  sub->add_flag("--no-progress", args->no_progress, "no progress bar, only per-epoch lines");
  sub->add_flag("--print-config", args->print_config,
                "print the config with the --set overrides applied and the resolved settings "
                "(defaults filled in), checked like a run's, and exit without training or "
                "creating the run directory");
  sub->add_flag("--json", args->json,
                "print the result as one JSON object (run_dir, stopped, stop_reason, step, "
                "checkpoint, epochs, last_epoch: the last epoch's metrics)");
  add_budget_flags(sub, args->budget, /*with_session=*/true);
  return [args] {
    // Tests hold the command here, in its setup phase, on a FIFO nobody writes to, so that a
    // signal provably arrives before the run directory exists (tests/cli/test_resume.cpp).
    // It reads until the test closes its end.
    if (const char* hold = std::getenv("HOURGLASS_TEST_HOLD_IN_SETUP")) {
      const int fd = ::open(hold, O_RDONLY | O_CLOEXEC);
      char byte = 0;
      while (fd >= 0 && ::read(fd, &byte, 1) > 0) {
      }
      if (fd >= 0) ::close(fd);
    }
    Config config = Config::load(args->config);
    for (const auto& o : args->overrides) config.set_override(o);
    const bool rl_run = rl::is_rl_config(config);
    const std::unique_ptr<Communicator> comm = rl_run ? nullptr : join_ranks(config);
    if (!args->checkpoint_every.empty()) {
      try {
        parse_duration_seconds(args->checkpoint_every);
      } catch (const Error& e) {
        throw_invalid("--checkpoint-every: " + e.message(), e.remedy());
      }
      config.set_override(fmt::format("checkpoint.every=\"{}\"", args->checkpoint_every));
    }
    if (args->checkpoint_every_steps)
      config.set_override(fmt::format("checkpoint.every_steps={}", *args->checkpoint_every_steps));
    HG_CHECK(args->stop_after >= 0, "--stop-after must be non-negative, got {}", args->stop_after);
    if (rl_run) {  // an [rl] table: the reinforcement-learning trainer (train_rl.h)
      HG_CHECK(args->memory_limit.empty(),
               "--memory-limit: a reinforcement-learning run holds no device memory to limit");
      TrainRlArgs a{args->config,     args->overrides,    "",         args->resume,
                    args->stop_after, args->print_config, args->json, args->budget};
      if (!args->print_config)
        a.run_dir =
            choose_run_dir(args->run_dir, args->resume, rl::parse_rl_run_config(config).name);
      return train_rl(config, a);
    }
    if (args->print_config) {
      const train::RunConfig run = train::parse_run_config(config);
      train::resolve_budget_settings(config, args->budget);
      config.reject_unused_keys();
      // The [engine] table with every key resolved, as config.toml will hold it.
      print_config(train::with_engine_keys(config, run.engine), train::trajectory_config_text(run),
                   args->json);
      return 0;
    }
    train::TrainerOptions options;
    options.progress = !args->no_progress;
    options.resume = args->resume;
    options.stop_after_steps = args->stop_after;
    if (!args->memory_limit.empty())
      options.memory_limit = parse_byte_size(args->memory_limit, "--memory-limit");
    options.budget = args->budget;
    options.communicator = comm.get();
    if (comm && comm->size() > 1 && args->run_dir.empty())
      throw_invalid(fmt::format("train: this process is one of {} ranks, which must all write to "
                                "one run directory",
                                comm->size()),
                    "pass --run-dir DIR (the same on every rank)");
    options.run_dir =
        choose_run_dir(args->run_dir, args->resume, train::parse_run_config(config).name);
    // Destroyed after the trainer: the run log's last line marks the run's files closed, so
    // that the process's time after it is its exit alone.
    struct ClosedLine {
      ~ClosedLine() { log_to_file_only("run closed; the process exits"); }
    } closed_line;
    train::Trainer trainer(config, options);
    if (trainer.writes_run_files())
      add_log_file((std::filesystem::path(trainer.run_dir()) / "train.log").string());
    const auto history = trainer.run();
    if (comm && comm->rank() != 0) return trainer.stopped() ? kExitStopped : 0;  // rank 0 reports
    if (args->json) {
      nlohmann::json out = {{"run_dir", trainer.run_dir()},
                            {"stopped", trainer.stopped()},
                            {"stop_reason", trainer.stop_reason()},
                            {"step", trainer.global_step()},
                            {"checkpoint", trainer.last_checkpoint()},
                            {"epochs", history.size()}};
      // The metrics.jsonl line of the last epoch (null before the first).
      out["last_epoch"] = history.empty()
                              ? nlohmann::json()
                              : nlohmann::json::parse(train::epoch_record_json(history.back()));
      std::printf("%s\n", out.dump().c_str());
      return trainer.stopped() ? kExitStopped : 0;
    }
    if (trainer.stopped()) {
      const std::string checkpoint = trainer.last_checkpoint().empty()
                                         ? "none (stopped before the first step)"
                                         : trainer.last_checkpoint();
      std::printf(
          "stopped (%s) at step %lld; checkpoint %s; continue with: hourglass train %s "
          "--run-dir %s --resume auto%s\n",
          trainer.stop_reason().c_str(), static_cast<long long>(trainer.global_step()),
          checkpoint.c_str(), args->config.c_str(), trainer.run_dir().c_str(),
          args->overrides.empty() ? "" : " (and the same --set flags)");
      return kExitStopped;
    }
    if (history.empty()) {
      std::printf("training done; outputs in %s\n", trainer.run_dir().c_str());
      return 0;
    }
    const auto& last = history.back();
    std::printf("test accuracy %.4f after %s (%.0f images/s); outputs in %s\n", last.test_acc,
                plural(last.epoch, "epoch").c_str(), last.images_per_s, trainer.run_dir().c_str());
    return 0;
  };
}

}  // namespace hg::cli
