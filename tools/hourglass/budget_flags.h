// The budget flags, registered the same way on every subcommand that takes them (plan now;
// train when the ledger is wired in). Values stay strings here and are parsed by
// train::resolve_budget_settings, so a bad value's error names its flag in one format.
#pragma once

#include <CLI/CLI.hpp>

#include "hourglass/train/run/budget.h"

namespace hg::cli {

// `flags` must outlive the parse (keep it in the subcommand's shared Args). `with_session`
// adds --phase, which only means something to a command that records a session.
inline void add_budget_flags(CLI::App* sub, train::BudgetFlags& flags, bool with_session) {
  sub->add_option("--budget", flags.budget,
                  "device-hours that may be spent, as a duration: 200h, 90m, 1h30m, 2d "
                  "(overrides budget.hours)");
  sub->add_option("--budget-usd", flags.budget_usd,
                  "money that may be spent, in USD, e.g. 170 (overrides budget.usd)");
  sub->add_option(
      "--price-per-hour", flags.price_per_hour,
      "USD per device-hour of this machine, e.g. 0.85 (overrides budget.price_per_hour)");
  sub->add_option("--budget-reserve", flags.reserve,
                  "time kept back for the final checkpoint and evaluation (default 2m; "
                  "overrides budget.reserve)");
  sub->add_option("--ledger", flags.ledger,
                  "budget ledger (JSON) shared by runs, so phases draw on one budget "
                  "(overrides budget.ledger)");
  if (with_session)
    sub->add_option("--phase", flags.phase,
                    "label of this session in the ledger: prototype, full, tuning, ... "
                    "(overrides budget.phase)");
}

}  // namespace hg::cli
