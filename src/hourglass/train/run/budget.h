// Compute budgets: what a user may spend ("200 GPU-hours", "$170 at $0.85 per hour") and the
// ledger that records what was spent, across resumes and across runs that share it, so that
// training stops, with a checkpoint, before the budget is overrun.
//
// Units. Budgets are in device-hours: one device busy for one hour. A process holding
// `devices` devices spends `devices` device-seconds per wall-clock second, so every method
// taking time from the trainer takes wall seconds (what a clock measures) and multiplies.
// Money is device-hours times the price per device-hour of the machine each session ran on.
//
// The ledger is a JSON file (by default <run_dir>/budget.json; several runs can share one with
// --ledger so that prototype, full training and tuning draw on one budget). Each process
// appends one session (start, end, wall and device seconds, devices, price, run, phase) and
// the totals are the sum over every session ever recorded. It is written atomically (temporary
// file, fsync, rename, directory fsync) at least every `flush_every_seconds` of charged time
// (budget.flush_every, default 5 s) and at close, so a kill -9 loses at most that much accounting;
// the version replaced by each write is kept as <file>.bak. A ledger that cannot be parsed is an
// error naming the file: resetting it would forget money already spent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hourglass/base/config.h"

namespace hg::train {

// What this session may spend and how it is charged.
struct BudgetLimits {
  double device_hours = 0;       // time budget in device-hours; 0: no time limit
  double usd = 0;                // money budget; 0: no money limit (needs price_per_hour)
  double price_per_hour = 0;     // USD per device-hour on the machine this session runs on
  int devices = 1;               // devices this process holds
  double reserve_seconds = 120;  // wall seconds kept back beyond the caller's estimate of the
                                 // final save and eval, for a slow last step or a misestimate
  double warn_fraction = 0.8;    // should_warn() fires once past this fraction of the budget

  bool has_limit() const { return device_hours > 0 || usd > 0; }
};

// The budget flags as typed on the command line; empty means not given.
struct BudgetFlags {
  std::string budget;          // --budget 200h (a duration: device-hours)
  std::string budget_usd;      // --budget-usd 170 (a leading $ is allowed)
  std::string price_per_hour;  // --price-per-hour 0.85
  std::string reserve;         // --budget-reserve 2m
  std::string ledger;          // --ledger PATH
  std::string phase;           // --phase NAME
};

// Limits plus where to record them.
struct BudgetSettings {
  BudgetLimits limits;
  std::string ledger_path;         // empty: the caller's default, <run_dir>/budget.json
  std::string phase;               // a label for the session: "prototype", "full", "tuning", ...
  double flush_every_seconds = 5;  // budget.flush_every: LedgerOptions::flush_every_seconds
};

// Reads the [budget] keys of `config` (hours, usd, price_per_hour, reserve, ledger, phase,
// flush_every), then applies the flags that were given over them, each replacing its own key
// only. Checks every value (non-negative, finite) and throws InvalidInput naming the flag or the
// key and its config file. With `usd_needs_price` a money budget without a price is an error too
// (training must turn money into time; `hourglass plan` takes prices from its price table instead).
BudgetSettings resolve_budget_settings(const Config& config, const BudgetFlags& flags,
                                       bool usd_needs_price = true);

// One process's stretch of work as the ledger records it.
struct LedgerSession {
  std::string id;   // unique: start time, process id and a random suffix
  std::string run;  // run name
  std::string phase;
  std::string started;  // UTC, ISO 8601
  std::string ended;    // time of the last write; final once `closed`
  bool closed = false;  // false: still running, or the process died
  int devices = 1;
  double price_per_hour = 0;
  double wall_seconds = 0;
  double device_seconds = 0;  // wall_seconds * devices
  std::string stop_reason;    // why it ended early, e.g. "budget"; empty otherwise

  double usd() const { return device_seconds / 3600.0 * price_per_hour; }
};

// A ledger file's content.
struct LedgerData {
  double budget_device_hours = 0;  // 0: none recorded
  double budget_usd = 0;
  std::vector<LedgerSession> sessions;

  double spent_device_seconds() const;
  double spent_usd() const;
};

// Reads and validates a ledger file. A missing file is Runtime; a file that is not a valid
// ledger is InvalidInput naming the file and the fault, suggesting the .bak.
LedgerData read_ledger(const std::string& path);
// The JSON text written for `data` (with derived totals, for people reading the file).
std::string ledger_json(const LedgerData& data);

// What finishing a run would take, from the current state of a ledger.
struct Projection {
  int64_t steps_left = 0;
  double wall_seconds = 0;  // to finish: steps left, then the final save and eval
  double device_seconds = 0;
  double usd = 0;
  double total_device_seconds = 0;  // spent so far plus the above
  double total_usd = 0;
  int64_t steps_affordable = 0;  // steps that fit in what is left (INT64_MAX: no limit)
  bool fits = true;              // finishing, plus the reserve, stays within the budget
};

struct LedgerOptions {
  // Charged wall time after which charge() writes the file; bounds what a crash can lose.
  double flush_every_seconds = 5;
};

// The ledger of one process. Opening it records a new session; charge() adds time to it;
// close() (or the destructor) writes the final state. Every write takes an flock on
// "<path>.lock", re-reads the file and replaces only this session, so concurrent runs sharing
// a ledger never erase each other's sessions and each sees the others' time at its next write.
// Not thread-safe: one thread (the training loop) uses it.
class BudgetLedger {
 public:
  // Opens `path`, creating it (and its directory) when missing, and writes the new session at
  // once. When `limits` has a time or money limit it becomes the ledger's budget; otherwise
  // the budget recorded in the file applies. Throws InvalidInput for a corrupted file, for a
  // money budget without a price, or for devices < 1; Runtime when the file cannot be written.
  BudgetLedger(std::string path, const BudgetLimits& limits, std::string run_name,
               std::string phase, LedgerOptions options = {});
  // Closes if close() was not called; an error then is logged, never thrown.
  ~BudgetLedger();
  BudgetLedger(const BudgetLedger&) = delete;
  BudgetLedger& operator=(const BudgetLedger&) = delete;

  // Adds `wall_seconds` of this process's time (charged times `devices`); writes the file when
  // `flush_every_seconds` of charges have accumulated since the last write.
  void charge(double wall_seconds);
  // Charges the wall-clock time since the ledger was opened or charge_elapsed() last ran
  // (steady clock). The trainer's usual call: nothing between two calls goes uncharged. Use
  // either this or charge() on one ledger, not both, or time is counted twice.
  void charge_elapsed();
  // Writes the file now.
  void flush();
  // Records why the session ends early ("budget", "interrupted", ...); written at close.
  void set_stop_reason(std::string reason);
  // Marks the session ended and writes the file. Further charges are a bug. A failed write
  // throws once; the session counts as closed all the same (the destructor does not retry).
  void close();

  double spent_device_seconds() const;  // every session, this one's unwritten time included
  double spent_usd() const;
  // Device-seconds left before the first limit is reached (may be negative once overrun);
  // +infinity with no limit.
  double remaining_device_seconds() const;
  // The same in this process's wall seconds (divided by devices).
  double remaining_wall_seconds() const;
  // The larger of the used fractions of the time and money budgets; 0 with no limit.
  double fraction_used() const;
  // True exactly once per session, the first time it is called with warn_fraction used.
  bool should_warn();
  // True when one more step of `next_step_seconds` (a moving average of recent steps) and then
  // `final_seconds` (final checkpoint and evaluation), plus the reserve, would exceed the
  // budget: the trainer then saves, evaluates and stops. Both in wall seconds.
  bool must_stop(double next_step_seconds, double final_seconds) const;
  // Time and cost to finish a run at `seconds_per_step`, and whether it fits.
  Projection projection(int64_t steps_done, int64_t steps_total, double seconds_per_step,
                        double final_seconds = 0) const;
  // One line for logs: "spent 1.50 of 2.00 device-hours (75%), $1.28 of $1.70; 0:30:00 left".
  std::string summary() const;

  const std::string& path() const { return path_; }
  const BudgetLimits& limits() const { return limits_; }  // with the ledger's budget applied
  const LedgerSession& session() const;
  const LedgerData& data() const { return data_; }  // as of the last write

 private:
  void write_locked(bool first);

  std::string path_;
  BudgetLimits limits_;
  bool caller_set_budget_ = false;
  LedgerOptions options_;
  LedgerData data_;
  size_t self_ = 0;               // this session's index in data_.sessions
  double unflushed_seconds_ = 0;  // wall seconds charged since the last write
  double last_elapsed_mark_ = 0;  // steady-clock seconds at the last charge_elapsed()
  bool warned_ = false;
  bool closed_ = false;
};

// An exponential moving average of step times, for must_stop(): recent steps dominate, so a
// change of speed (another job on the machine, a larger eval) shows within about `window`
// steps, and the first value seeds it.
class MovingAverage {
 public:
  explicit MovingAverage(int window = 20) : alpha_(2.0 / (double(window) + 1.0)) {}
  void add(double value) { value_ = count_++ == 0 ? value : value_ + alpha_ * (value - value_); }
  double value() const { return value_; }
  int64_t count() const { return count_; }

 private:
  double alpha_;
  double value_ = 0;
  int64_t count_ = 0;
};

}  // namespace hg::train
