#include "hourglass/train/run/budget.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/duration.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::train {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kLedgerFormat = "hourglass-budget-ledger";
constexpr int kLedgerVersion = 1;
constexpr int kLedgerMaxDepth = 16;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- parsing the limits ----

// A non-negative decimal amount, optionally with a leading '$' ("170", "$170", "0.85").
// `where` names the flag or key in the error.
double parse_amount(std::string_view text, const std::string& where, const std::string& unit) {
  std::string_view body = text;
  while (!body.empty() && body.front() == ' ') body.remove_prefix(1);
  while (!body.empty() && body.back() == ' ') body.remove_suffix(1);
  if (!body.empty() && body.front() == '$') body.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (body.empty() || ec != std::errc() || end != body.data() + body.size() ||
      !std::isfinite(value) || value < 0)
    throw_invalid(fmt::format("{}: '{}' is not a non-negative amount of {}", where,
                              untrusted_excerpt(text), unit),
                  fmt::format("write a plain number such as 170 or 0.85 ({})", unit));
  return value;
}

// parse_duration_seconds with the flag or key that gave the text in the message.
double parse_duration_for(std::string_view text, const std::string& where) {
  try {
    return parse_duration_seconds(text);
  } catch (const Error& e) {
    throw Error(e.kind(), where + ": " + e.message(), e.remedy());
  }
}

void check_key_range(const Config& c, const char* key, double value, const char* what) {
  if (!std::isfinite(value) || value < 0)
    throw_invalid(fmt::format("{}: {} = {} must be a non-negative number of {}", c.source(), key,
                              value, what),
                  fmt::format("set {} to 0 for no limit, or to a positive number", key));
}

// ---- time stamps and identities ----

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string new_session_id() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  // The random part keeps two processes that start in one second with recycled pids apart.
  std::random_device random;
  return fmt::format("{}-{}-{:04x}", stamp, ::getpid(), random() & 0xffff);
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- reading a ledger file ----

[[noreturn]] void bad_ledger(const std::string& path, const std::string& why) {
  throw_invalid(
      fmt::format("budget ledger {} is corrupted: {}", path, why),
      fmt::format("restore the previous good version with 'cp {0}.bak {0}' if it exists, or "
                  "repair the file; hourglass never resets a ledger, because that would forget "
                  "the time and money already spent",
                  path));
}

const json& member(const json& object, const char* key, const std::string& where,
                   const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) bad_ledger(path, fmt::format("{} has no '{}'", where, key));
  return *it;
}

double number_member(const json& object, const char* key, const std::string& where,
                     const std::string& path) {
  const json& v = member(object, key, where, path);
  if (!v.is_number()) bad_ledger(path, fmt::format("{}.{} must be a number", where, key));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0)
    bad_ledger(path, fmt::format("{}.{} = {} must be finite and non-negative", where, key, d));
  return d;
}

std::string string_member(const json& object, const char* key, const std::string& where,
                          const std::string& path) {
  const json& v = member(object, key, where, path);
  if (!v.is_string()) bad_ledger(path, fmt::format("{}.{} must be a string", where, key));
  return v.get<std::string>();
}

bool bool_member(const json& object, const char* key, const std::string& where,
                 const std::string& path) {
  const json& v = member(object, key, where, path);
  if (!v.is_boolean()) bad_ledger(path, fmt::format("{}.{} must be true or false", where, key));
  return v.get<bool>();
}

LedgerSession parse_session(const json& s, const std::string& where, const std::string& path) {
  if (!s.is_object()) bad_ledger(path, where + " must be an object");
  LedgerSession r;
  r.id = string_member(s, "id", where, path);
  r.run = string_member(s, "run", where, path);
  r.phase = string_member(s, "phase", where, path);
  r.started = string_member(s, "started", where, path);
  r.ended = string_member(s, "ended", where, path);
  r.closed = bool_member(s, "closed", where, path);
  const double devices = number_member(s, "devices", where, path);
  if (devices < 1 || devices != std::floor(devices) || devices > 1e6)
    bad_ledger(path,
               fmt::format("{}.devices = {} must be a whole number of at least 1", where, devices));
  r.devices = int(devices);
  r.price_per_hour = number_member(s, "price_per_hour", where, path);
  r.wall_seconds = number_member(s, "wall_seconds", where, path);
  r.device_seconds = number_member(s, "device_seconds", where, path);
  if (s.contains("stop_reason")) r.stop_reason = string_member(s, "stop_reason", where, path);
  return r;
}

LedgerData parse_ledger(const std::string& text, const std::string& path) {
  if (text.empty()) bad_ledger(path, "the file is empty");
  // A ledger nests 3 deep; far deeper text would overflow the stack in the parser's tree.
  if (const size_t at = find_json_nesting_beyond(text, kLedgerMaxDepth); at != std::string::npos)
    bad_ledger(path, fmt::format("its JSON nests deeper than {} levels (at byte {})",
                                 kLedgerMaxDepth, at));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    // Syntax errors, and numbers too large for a double (out_of_range.406).
    std::string why = e.what();  // "[json.exception.parse_error.101] parse error at ..."
    if (const auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
    bad_ledger(path, "it is not valid JSON (" + untrusted_excerpt(why, 200) + ")");
  }
  if (!j.is_object()) bad_ledger(path, "the top level must be a JSON object");
  if (!j.contains("format") || j["format"] != kLedgerFormat)
    bad_ledger(path, fmt::format("'format' must be \"{}\"; is this a ledger file?", kLedgerFormat));
  const double version = number_member(j, "version", "the file", path);
  if (version != kLedgerVersion)
    bad_ledger(path, fmt::format("version {} is not {}, the version this hourglass reads; a newer "
                                 "hourglass may have written it",
                                 version, kLedgerVersion));
  LedgerData d;
  const json& budget = member(j, "budget", "the file", path);
  if (!budget.is_object()) bad_ledger(path, "'budget' must be an object");
  d.budget_device_hours = number_member(budget, "device_hours", "budget", path);
  d.budget_usd = number_member(budget, "usd", "budget", path);
  const json& sessions = member(j, "sessions", "the file", path);
  if (!sessions.is_array()) bad_ledger(path, "'sessions' must be an array");
  for (size_t i = 0; i < sessions.size(); ++i)
    d.sessions.push_back(parse_session(sessions[i], fmt::format("sessions[{}]", i), path));
  // "totals" is derived, written for people reading the file; the sessions are the truth.
  return d;
}

std::string money(double usd) { return fmt::format("${:.2f}", usd); }

}  // namespace

// ---- BudgetSettings ----

BudgetSettings resolve_budget_settings(const Config& c, const BudgetFlags& flags,
                                       bool usd_needs_price) {
  BudgetSettings s;
  BudgetLimits& l = s.limits;
  l.device_hours = c.get_double("budget.hours", 0.0);
  check_key_range(c, "budget.hours", l.device_hours, "device-hours");
  l.usd = c.get_double("budget.usd", 0.0);
  check_key_range(c, "budget.usd", l.usd, "USD");
  l.price_per_hour = c.get_double("budget.price_per_hour", 0.0);
  check_key_range(c, "budget.price_per_hour", l.price_per_hour, "USD per device-hour");
  if (c.has("budget.reserve"))
    l.reserve_seconds =
        parse_duration_for(c.get_string("budget.reserve", ""), c.source() + ": budget.reserve");
  if (c.has("budget.flush_every"))
    s.flush_every_seconds = parse_duration_for(c.get_string("budget.flush_every", ""),
                                               c.source() + ": budget.flush_every");
  s.ledger_path = c.get_string("budget.ledger", "");
  s.phase = c.get_string("budget.phase", "");

  // Flags replace the key they correspond to, and only that one.
  // A flag of zero is refused: "--budget 0" reads as "nothing may be spent", where the config
  // keys' 0 (their default) means no limit.
  if (!flags.budget.empty()) {
    l.device_hours = parse_duration_for(flags.budget, "--budget") / 3600.0;
    if (l.device_hours <= 0)
      throw_invalid(fmt::format("--budget {}: a budget of no time leaves nothing to train with",
                                untrusted_excerpt(flags.budget)),
                    "give a positive duration such as 90m, or leave --budget out for no limit");
  }
  if (!flags.budget_usd.empty()) {
    l.usd = parse_amount(flags.budget_usd, "--budget-usd", "USD");
    if (l.usd <= 0)
      throw_invalid(fmt::format("--budget-usd {}: a budget of no money leaves nothing to train "
                                "with",
                                untrusted_excerpt(flags.budget_usd)),
                    "give a positive amount such as 170, or leave --budget-usd out for no limit");
  }
  if (!flags.price_per_hour.empty())
    l.price_per_hour =
        parse_amount(flags.price_per_hour, "--price-per-hour", "USD per device-hour");
  if (!flags.reserve.empty())
    l.reserve_seconds = parse_duration_for(flags.reserve, "--budget-reserve");
  if (!flags.ledger.empty()) s.ledger_path = flags.ledger;
  if (!flags.phase.empty()) s.phase = flags.phase;

  if (usd_needs_price && l.usd > 0 && l.price_per_hour <= 0) {
    const std::string from =
        !flags.budget_usd.empty() ? "--budget-usd" : c.source() + ": budget.usd";
    throw_invalid(
        fmt::format("{}: a budget of {} needs the price of a device-hour to be turned "
                    "into time",
                    from, money(l.usd)),
        "pass --price-per-hour (or set budget.price_per_hour), e.g. --price-per-hour 0.85");
  }
  return s;
}

// ---- LedgerData ----

double LedgerData::spent_device_seconds() const {
  double total = 0;
  for (const LedgerSession& s : sessions) total += s.device_seconds;
  return total;
}

double LedgerData::spent_usd() const {
  double total = 0;
  for (const LedgerSession& s : sessions) total += s.usd();
  return total;
}

LedgerData read_ledger(const std::string& path) {
  return parse_ledger(read_file_bytes(path), path);
}

std::string ledger_json(const LedgerData& d) {
  json j;
  j["format"] = kLedgerFormat;
  j["version"] = kLedgerVersion;
  j["budget"] = {{"device_hours", d.budget_device_hours}, {"usd", d.budget_usd}};
  const double spent = d.spent_device_seconds();
  j["totals"] = {{"device_seconds", spent},
                 {"device_hours", spent / 3600.0},
                 {"usd", d.spent_usd()},
                 {"sessions", d.sessions.size()}};
  json sessions = json::array();
  for (const LedgerSession& s : d.sessions)
    sessions.push_back({{"id", s.id},
                        {"run", s.run},
                        {"phase", s.phase},
                        {"started", s.started},
                        {"ended", s.ended},
                        {"closed", s.closed},
                        {"devices", s.devices},
                        {"price_per_hour", s.price_per_hour},
                        {"wall_seconds", s.wall_seconds},
                        {"device_seconds", s.device_seconds},
                        {"stop_reason", s.stop_reason}});
  j["sessions"] = std::move(sessions);
  return j.dump(2) + "\n";
}

// ---- BudgetLedger ----

BudgetLedger::BudgetLedger(std::string path, const BudgetLimits& limits, std::string run_name,
                           std::string phase, LedgerOptions options)
    : path_(std::move(path)),
      limits_(limits),
      caller_set_budget_(limits.has_limit()),
      options_(options),
      last_elapsed_mark_(steady_seconds()) {
  HG_CHECK(limits_.devices >= 1, "budget ledger {}: devices must be at least 1, not {}", path_,
           limits_.devices);
  HG_ASSERT(options_.flush_every_seconds >= 0);
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw_runtime(
        fmt::format("cannot create the directory of budget ledger {}: {}", path_, ec.message()),
        "choose a writable location with --ledger");
  LedgerSession s;
  s.id = new_session_id();
  s.run = std::move(run_name);
  s.phase = std::move(phase);
  s.started = s.ended = utc_now();
  s.devices = limits_.devices;
  s.price_per_hour = limits_.price_per_hour;
  data_.sessions.push_back(std::move(s));
  self_ = 0;
  write_locked(/*first=*/true);
}

BudgetLedger::~BudgetLedger() {
  if (closed_) return;
  try {
    close();
  } catch (const std::exception& e) {
    HG_LOG_ERROR("budget ledger {}: the last {:.1f} s of this session could not be recorded: {}",
                 path_, unflushed_seconds_, e.what());
  }
}

void BudgetLedger::write_locked(bool first) {
  const LedgerSession mine = data_.sessions[self_];
  FileLock lock(path_);
  // Re-read under the lock: another process sharing the ledger may have written since.
  LedgerData fresh;
  if (std::filesystem::exists(path_)) fresh = read_ledger(path_);
  if (first && !caller_set_budget_) {
    limits_.device_hours = fresh.budget_device_hours;
    limits_.usd = fresh.budget_usd;
  }
  if (first && limits_.usd > 0 && limits_.price_per_hour <= 0)
    throw_invalid(fmt::format("budget ledger {} holds a budget of {} but this session has no price "
                              "per device-hour, so its cost cannot be charged",
                              path_, money(limits_.usd)),
                  "pass --price-per-hour (or set budget.price_per_hour)");
  if (caller_set_budget_) {
    fresh.budget_device_hours = limits_.device_hours;
    fresh.budget_usd = limits_.usd;
  }
  auto it = std::find_if(fresh.sessions.begin(), fresh.sessions.end(),
                         [&](const LedgerSession& s) { return s.id == mine.id; });
  // Not found after the first write only when someone edited the file; record the session anew.
  if (it == fresh.sessions.end())
    it = fresh.sessions.insert(fresh.sessions.end(), mine);
  else
    *it = mine;
  const size_t index = size_t(it - fresh.sessions.begin());
  write_file_atomic(path_, ledger_json(fresh), path_ + ".bak");
  data_ = std::move(fresh);
  self_ = index;
  unflushed_seconds_ = 0;
}

void BudgetLedger::charge(double wall_seconds) {
  HG_ASSERT(!closed_, "budget ledger {}: charge() after close()", path_);
  HG_ASSERT(std::isfinite(wall_seconds) && wall_seconds >= 0, "charge({})", wall_seconds);
  LedgerSession& s = data_.sessions[self_];
  s.wall_seconds += wall_seconds;
  s.device_seconds += wall_seconds * double(s.devices);
  unflushed_seconds_ += wall_seconds;
  if (unflushed_seconds_ >= options_.flush_every_seconds) flush();
}

void BudgetLedger::charge_elapsed() {
  const double now = steady_seconds();
  const double elapsed = std::max(0.0, now - last_elapsed_mark_);
  last_elapsed_mark_ = now;
  charge(elapsed);
}

void BudgetLedger::flush() {
  data_.sessions[self_].ended = utc_now();
  write_locked(false);
}

void BudgetLedger::set_stop_reason(std::string reason) {
  data_.sessions[self_].stop_reason = std::move(reason);
}

void BudgetLedger::close() {
  if (closed_) return;
  closed_ = true;  // a failed final write is the caller's to report; the destructor skips it
  LedgerSession& s = data_.sessions[self_];
  s.closed = true;
  s.ended = utc_now();
  write_locked(false);
  closed_ = true;
}

const LedgerSession& BudgetLedger::session() const { return data_.sessions[self_]; }

double BudgetLedger::spent_device_seconds() const { return data_.spent_device_seconds(); }

double BudgetLedger::spent_usd() const { return data_.spent_usd(); }

double BudgetLedger::remaining_device_seconds() const {
  double left = kInf;
  if (limits_.device_hours > 0)
    left = std::min(left, limits_.device_hours * 3600.0 - spent_device_seconds());
  // Money left buys time at this session's price (checked > 0 when there is a money budget).
  if (limits_.usd > 0)
    left = std::min(left, (limits_.usd - spent_usd()) / limits_.price_per_hour * 3600.0);
  return left;
}

double BudgetLedger::remaining_wall_seconds() const {
  return remaining_device_seconds() / double(limits_.devices);
}

double BudgetLedger::fraction_used() const {
  double f = 0;
  if (limits_.device_hours > 0)
    f = std::max(f, spent_device_seconds() / (limits_.device_hours * 3600.0));
  if (limits_.usd > 0) f = std::max(f, spent_usd() / limits_.usd);
  return f;
}

bool BudgetLedger::should_warn() {
  if (warned_ || !limits_.has_limit() || fraction_used() < limits_.warn_fraction) return false;
  warned_ = true;
  return true;
}

bool BudgetLedger::must_stop(double next_step_seconds, double final_seconds) const {
  if (!limits_.has_limit()) return false;
  const double needed_wall =
      std::max(0.0, next_step_seconds) + std::max(0.0, final_seconds) + limits_.reserve_seconds;
  return needed_wall * double(limits_.devices) > remaining_device_seconds();
}

Projection BudgetLedger::projection(int64_t steps_done, int64_t steps_total,
                                    double seconds_per_step, double final_seconds) const {
  Projection p;
  const double step = std::max(0.0, seconds_per_step);
  const double final_wall = std::max(0.0, final_seconds);
  p.steps_left = std::max<int64_t>(0, steps_total - steps_done);
  p.wall_seconds = double(p.steps_left) * step + final_wall;
  p.device_seconds = p.wall_seconds * double(limits_.devices);
  p.usd = p.device_seconds / 3600.0 * limits_.price_per_hour;
  p.total_device_seconds = spent_device_seconds() + p.device_seconds;
  p.total_usd = spent_usd() + p.usd;
  if (!limits_.has_limit()) {
    p.steps_affordable = std::numeric_limits<int64_t>::max();
    p.fits = true;
    return p;
  }
  const double spare_wall = remaining_wall_seconds() - limits_.reserve_seconds - final_wall;
  if (spare_wall <= 0)
    p.steps_affordable = 0;
  else if (step <= 0 || spare_wall / step >= 9e18)
    p.steps_affordable = std::numeric_limits<int64_t>::max();
  else
    p.steps_affordable = int64_t(std::floor(spare_wall / step));
  p.fits = spare_wall >= 0 && p.steps_left <= p.steps_affordable;
  return p;
}

std::string BudgetLedger::summary() const {
  const double spent_hours = spent_device_seconds() / 3600.0;
  std::string text;
  // Two decimals, more for a limit under 0.1 device-hours, so that it shows two significant
  // digits (a 1-minute budget is "0.017", not "0.00").
  int decimals = 2;
  if (limits_.device_hours > 0 && limits_.device_hours < 0.1)
    decimals = std::min(6, int(std::ceil(-std::log10(limits_.device_hours))) + 1);
  if (limits_.device_hours > 0)
    text = fmt::format("spent {:.{}f} of {:.{}f} device-hours", spent_hours, decimals,
                       limits_.device_hours, decimals);
  else
    text = fmt::format("spent {:.2f} device-hours", spent_hours);
  if (limits_.usd > 0)
    text += fmt::format(", {} of {}", money(spent_usd()), money(limits_.usd));
  else if (spent_usd() > 0)
    text += fmt::format(", {}", money(spent_usd()));
  if (!limits_.has_limit()) return text + " (no budget set)";
  return text + fmt::format(" ({:.0f}% used); {} left on {} device(s)", 100.0 * fraction_used(),
                            format_duration_clock(std::max(0.0, remaining_wall_seconds())),
                            limits_.devices);
}

}  // namespace hg::train
