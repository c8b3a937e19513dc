// hourglass: train and evaluate image classifiers within a fixed compute budget.
#include <cstdio>
#include <cstring>
#include <map>

#include "commands.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "openmp_wait.h"
#include "stop_signals.h"

namespace {

int exit_code(hg::ErrorKind kind) {
  switch (kind) {
    case hg::ErrorKind::InvalidInput: return 2;
    case hg::ErrorKind::Internal: return 70;
    case hg::ErrorKind::Diverged: return hg::cli::kExitDiverged;
    default: return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP's wait policy for a shared machine (openmp_wait.h): may execute the command again.
  hg::cli::apply_openmp_wait_default(argv);
  // Before anything else: no stop signal may find the default action (stop_signals.h).
  hg::cli::install_stop_handlers();
  CLI::App app{"hourglass " HOURGLASS_VERSION
               ": a deep-learning training engine that gets the most out of a fixed compute "
               "budget.\nResults go to stdout (--json: one JSON object), log lines and warnings "
               "to stderr. --log-level and --color may come before or after the subcommand.\n"
               "Exit codes: 0 success, 2 bad input (config, flags, data files, an unknown config "
               "key), 1 other failure, 3 training diverged (the loss became NaN or infinite; the "
               "last good checkpoint is kept), 70 internal error, 75 training stopped by a "
               "signal, --stop-after, a STOP file or a budget ledger that cannot be updated, "
               "after writing a checkpoint (none when stopped before the first step; continue "
               "with --resume auto)."};
  app.require_subcommand(1);
  // CLI11's own errors ("A subcommand is required", "The following argument was not expected:
  // ...") on one line with the prefix of every other error; set before the subcommands are
  // added, which copy it.
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    std::string help = "hourglass";
    for (const CLI::App* sub : failed->get_subcommands()) help += " " + sub->get_name();
    return std::string("hourglass: error: ") + e.what() + " (run `" + help +
           " --help` for the usage)\n";
  });
  app.set_version_flag("--version", "hourglass " HOURGLASS_VERSION, "print the version and exit");
  // The global options are also accepted after the subcommand: an option a subcommand does
  // not know falls through to this app (fallthrough is inherited by the subcommands).
  app.fallthrough();
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off")
      ->capture_default_str();
  std::string color = "auto";
  app.add_option("--color", color,
                 "color the log lines: auto (when stderr is a terminal and NO_COLOR is not set), "
                 "always or never")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "always", "never"}));
  const std::map<std::string, hg::cli::Runner> runners = {
      {"train", hg::cli::add_train(app)},
      {"eval", hg::cli::add_eval(app)},
      {"export", hg::cli::add_export(app)},
      {"quantize", hg::cli::add_quantize(app)},
      {"predict", hg::cli::add_predict(app)},
      {"info", hg::cli::add_info(app)},
      {"bench", hg::cli::add_bench(app)},
      {"plan", hg::cli::add_plan(app)},
      {"doctor", hg::cli::add_doctor(app)},
      {"pack", hg::cli::add_pack(app)},
      {"launch", hg::cli::add_launch(app)},
      {"monitor", hg::cli::add_monitor(app)},
      {"profile", hg::cli::add_profile(app)},
      {"report", hg::cli::add_report(app)},
      {"tune", hg::cli::add_tune(app)},
      {"rank-info", hg::cli::add_rank_info(app)},
      // Last: its script lists the subcommands registered above.
      {"completion", hg::cli::add_completion(app)},
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  const std::string command = app.get_subcommands().front()->get_name();
  if (const int signo = hg::cli::settle_stop_handlers(command == "train"); signo != 0) {
    std::fprintf(stderr,
                 "hourglass: stopped by signal %d (%s) before training started: nothing "
                 "written, exit 75\n",
                 signo, strsignal(signo));
    return hg::cli::kExitStopped;
  }
  try {
    hg::init_logging(color);
    hg::set_log_level(log_level);
    return runners.at(command)();
  } catch (const hg::Error& e) {
    std::fprintf(stderr, "hourglass: error: %s\n", e.one_line().c_str());
    return exit_code(e.kind());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hourglass: error: %s\n", e.what());
    return 1;
  }
}
