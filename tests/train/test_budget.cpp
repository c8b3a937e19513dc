// The budget ledger: totals across resumes and crashes, concurrent sharing, corruption
// reported (never reset), the 80% warning, must_stop before an overrun, money budgets, and the
// flags and config keys that set the limits.
#include "hourglass/train/run/budget.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "support/expect_error.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "hourglass/base/error.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  return test::fresh_temp_dir("hourglass_budget_" + name);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

using test::expect_invalid;

BudgetLimits hours(double h, double reserve = 0) {
  BudgetLimits l;
  l.device_hours = h;
  l.reserve_seconds = reserve;
  return l;
}

// ---- limits from flags and keys ----

TEST(BudgetSettings, ConfigKeysAndFlagsOverridingThem) {
  const Config c = Config::parse(R"([budget]
hours = 2.5
usd = 170
price_per_hour = 0.85
reserve = "2m"
ledger = "shared/ledger.json"
phase = "prototype"
flush_every = "1m"
)",
                                 "run.toml");
  BudgetSettings s = resolve_budget_settings(c, {});
  EXPECT_DOUBLE_EQ(s.limits.device_hours, 2.5);
  EXPECT_DOUBLE_EQ(s.limits.usd, 170);
  EXPECT_DOUBLE_EQ(s.limits.price_per_hour, 0.85);
  EXPECT_DOUBLE_EQ(s.limits.reserve_seconds, 120);
  EXPECT_EQ(s.ledger_path, "shared/ledger.json");
  EXPECT_EQ(s.phase, "prototype");
  EXPECT_DOUBLE_EQ(s.flush_every_seconds, 60);
  EXPECT_TRUE(c.unused_keys().empty());  // every [budget] key counts as read

  BudgetFlags f;
  f.budget = "200h";
  f.budget_usd = "$50";
  f.reserve = "90s";
  f.phase = "full";
  s = resolve_budget_settings(c, f);
  EXPECT_DOUBLE_EQ(s.limits.device_hours, 200);
  EXPECT_DOUBLE_EQ(s.limits.usd, 50);
  EXPECT_DOUBLE_EQ(s.limits.price_per_hour, 0.85);  // not given as a flag: the key stays
  EXPECT_DOUBLE_EQ(s.limits.reserve_seconds, 90);
  EXPECT_EQ(s.ledger_path, "shared/ledger.json");
  EXPECT_EQ(s.phase, "full");

  // No [budget] at all: no limit, the default reserve.
  s = resolve_budget_settings(Config::parse("", "empty.toml"), {});
  EXPECT_FALSE(s.limits.has_limit());
  EXPECT_DOUBLE_EQ(s.limits.reserve_seconds, BudgetLimits{}.reserve_seconds);
  EXPECT_DOUBLE_EQ(s.flush_every_seconds, LedgerOptions{}.flush_every_seconds);
  f = {};
  f.budget = "1h30m";
  EXPECT_DOUBLE_EQ(resolve_budget_settings(Config::parse("", "e.toml"), f).limits.device_hours,
                   1.5);
}

TEST(BudgetSettings, BadFlagsAndKeysAreNamed) {
  const Config empty = Config::parse("", "empty.toml");
  BudgetFlags f;
  f.budget = "2x";
  expect_invalid([&] { resolve_budget_settings(empty, f); }, {"--budget", "2x", "unit"});
  f = {};
  f.budget_usd = "lots";
  expect_invalid([&] { resolve_budget_settings(empty, f); }, {"--budget-usd", "lots"});
  f = {};
  f.price_per_hour = "-1";
  expect_invalid([&] { resolve_budget_settings(empty, f); }, {"--price-per-hour", "-1"});
  // A flag of zero would read as "nothing to spend": refused, where a key's 0 means no limit.
  f = {};
  f.budget = "0";
  expect_invalid([&] { resolve_budget_settings(empty, f); }, {"--budget 0", "leave --budget out"});
  f = {};
  f.budget_usd = "$0";
  f.price_per_hour = "1";
  expect_invalid([&] { resolve_budget_settings(empty, f); }, {"--budget-usd $0", "positive"});
  EXPECT_EQ(resolve_budget_settings(Config::parse("[budget]\nhours = 0\n", "z.toml"), {})
                .limits.device_hours,
            0);
  f = {};
  f.reserve = "soon";
  expect_invalid([&] { resolve_budget_settings(empty, f); }, {"--budget-reserve", "soon"});
  // A money budget needs a price, unless the caller prices it elsewhere (plan's table).
  f = {};
  f.budget_usd = "170";
  expect_invalid([&] { resolve_budget_settings(empty, f); }, {"--budget-usd", "--price-per-hour"});
  EXPECT_DOUBLE_EQ(resolve_budget_settings(empty, f, /*usd_needs_price=*/false).limits.usd, 170);

  expect_invalid(
      [] { resolve_budget_settings(Config::parse("[budget]\nhours = -1\n", "neg.toml"), {}); },
      {"neg.toml", "budget.hours"});
  expect_invalid(
      [] {
        resolve_budget_settings(Config::parse("[budget]\nreserve = \"later\"\n", "r.toml"), {});
      },
      {"r.toml", "budget.reserve", "later"});
  expect_invalid(
      [] {
        resolve_budget_settings(Config::parse("[budget]\nflush_every = \"often\"\n", "f.toml"), {});
      },
      {"f.toml", "budget.flush_every", "often"});
  expect_invalid(
      [] { resolve_budget_settings(Config::parse("[budget]\nusd = 5\n", "u.toml"), {}); },
      {"u.toml", "budget.usd", "price"});
  expect_invalid(
      [] { resolve_budget_settings(Config::parse("[budget]\nhours = \"2h\"\n", "t.toml"), {}); },
      {"budget.hours"});
}

// ---- the ledger ----

TEST(BudgetLedger, AccumulatesAcrossReopenedSessions) {
  const std::string path = temp_dir("resume") + "/budget.json";
  {
    BudgetLedger ledger(path, hours(2), "run-a", "prototype");
    ledger.charge(100);
    ledger.charge(20.5);
    EXPECT_DOUBLE_EQ(ledger.spent_device_seconds(), 120.5);
  }  // the destructor closes
  {
    // Resumed without flags: the budget recorded in the file applies.
    BudgetLedger ledger(path, BudgetLimits{}, "run-a", "full");
    EXPECT_DOUBLE_EQ(ledger.limits().device_hours, 2);
    EXPECT_DOUBLE_EQ(ledger.spent_device_seconds(), 120.5);
    ledger.charge(79.5);
    ledger.close();
    EXPECT_DOUBLE_EQ(ledger.spent_device_seconds(), 200);
    EXPECT_DOUBLE_EQ(ledger.remaining_device_seconds(), 7200 - 200);
  }
  const LedgerData d = read_ledger(path);
  ASSERT_EQ(d.sessions.size(), 2u);
  EXPECT_DOUBLE_EQ(d.spent_device_seconds(), 200);
  EXPECT_DOUBLE_EQ(d.budget_device_hours, 2);
  EXPECT_EQ(d.sessions[0].phase, "prototype");
  EXPECT_EQ(d.sessions[1].phase, "full");
  EXPECT_EQ(d.sessions[1].run, "run-a");
  EXPECT_NE(d.sessions[0].id, d.sessions[1].id);
  for (const auto& s : d.sessions) {
    EXPECT_TRUE(s.closed);
    EXPECT_FALSE(s.started.empty());
    EXPECT_GE(s.ended, s.started);  // ISO 8601 UTC strings order as times
  }
  // Human-readable totals are in the file too.
  EXPECT_NE(read_text(path).find("\"totals\""), std::string::npos);
}

TEST(BudgetLedger, AKilledProcessLosesAtMostTheFlushInterval) {
  const std::string path = temp_dir("crash") + "/budget.json";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "trainer": charges each step; the ledger writes after every 5 s of charges.
    BudgetLedger ledger(path, hours(1), "crashy", "", LedgerOptions{5});
    ledger.charge(4);  // not written yet
    ledger.charge(2);  // 6 s >= 5 s: written
    ledger.charge(3);  // not written: lost with the process
    ::kill(::getpid(), SIGKILL);
    ::_exit(3);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  LedgerData d = read_ledger(path);
  ASSERT_EQ(d.sessions.size(), 1u);
  EXPECT_FALSE(d.sessions[0].closed);  // died without closing
  EXPECT_DOUBLE_EQ(d.sessions[0].wall_seconds, 6);
  // A leftover temporary file from a write cut short does not matter.
  write_text(path + ".tmp.999999", "{ half a ledg");

  // The next session starts from what was recorded and adds to it.
  {
    BudgetLedger ledger(path, BudgetLimits{}, "crashy", "");
    EXPECT_DOUBLE_EQ(ledger.spent_device_seconds(), 6);
    ledger.charge(10);
  }
  d = read_ledger(path);
  ASSERT_EQ(d.sessions.size(), 2u);
  EXPECT_DOUBLE_EQ(d.spent_device_seconds(), 16);
  EXPECT_FALSE(d.sessions[0].closed);
  EXPECT_TRUE(d.sessions[1].closed);
}

TEST(BudgetLedger, CorruptedFileIsAnErrorNamingItAndIsNeverReset) {
  const std::string dir = temp_dir("corrupt");
  const std::string path = dir + "/budget.json";
  {
    BudgetLedger ledger(path, hours(1), "r", "", LedgerOptions{1e9});
    ledger.charge(30);
    ledger.flush();  // the version written at open becomes the .bak
    ledger.charge(12);
  }  // close writes 42 s; the 30 s version becomes the .bak
  // The backup is the previous good version: valid, with less time than the current one.
  ASSERT_TRUE(fs::exists(path + ".bak"));
  EXPECT_DOUBLE_EQ(read_ledger(path + ".bak").spent_device_seconds(), 30);
  EXPECT_DOUBLE_EQ(read_ledger(path).spent_device_seconds(), 42);

  const std::string garbage = "{\"format\": \"hourglass-budget-ledger\", \"vers";
  write_text(path, garbage);
  expect_invalid([&] { BudgetLedger ledger(path, hours(1), "r", ""); },
                 {path, "corrupted", "not valid JSON", path + ".bak"});
  EXPECT_EQ(read_text(path), garbage);  // untouched
  expect_invalid([&] { read_ledger(path); }, {path, "corrupted"});

  // Valid JSON that is not a valid ledger names the faulty field.
  std::string text = read_text(path + ".bak");
  const auto at = text.find("\"device_seconds\"", text.find("\"sessions\""));
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, text.find_first_of(",\n", at) - at, "\"device_seconds\": \"30\"");
  write_text(path, text);
  expect_invalid([&] { read_ledger(path); }, {path, "sessions[0].device_seconds"});
  write_text(path, "");
  expect_invalid([&] { read_ledger(path); }, {path, "empty"});
  write_text(path, "[1, 2]");
  expect_invalid([&] { read_ledger(path); }, {path, "object"});
  write_text(path, R"({"format": "something-else", "version": 1})");
  expect_invalid([&] { read_ledger(path); }, {path, "format"});
  // Found by fuzz/fuzz_ledger: a number beyond a double's range escaped as the JSON library's
  // own exception and ended the process; a deeply nested value overflowed the stack.
  write_text(path, "\n3E8452\n");
  expect_invalid([&] { read_ledger(path); }, {path, "not valid JSON"});
  write_text(path, std::string(100000, '[') + std::string(100000, ']'));
  expect_invalid([&] { read_ledger(path); }, {path, "nests deeper than 16"});
  // ... and a syntax error quoted the JSON library's whole "last read" text from the file.
  write_text(path, "\"" + std::string(5000, 'x') + "\n");
  try {
    read_ledger(path);
    ADD_FAILURE() << "an unterminated string was read as a ledger";
  } catch (const Error& e) {
    EXPECT_LT(e.message().size(), 600u) << e.message();
  }

  // A ledger damaged under an open session: close() throws once, naming the file, and the
  // destructor does not write over the damage.
  const std::string other = dir + "/other.json";
  {
    BudgetLedger open_one(other, hours(1), "r", "");
    write_text(other, "not a ledger");
    expect_invalid([&] { open_one.close(); }, {other, "corrupted"});
  }
  EXPECT_EQ(read_text(other), "not a ledger");

  // The remedy works: restoring the backup makes the ledger usable again.
  fs::copy_file(path + ".bak", path, fs::copy_options::overwrite_existing);
  BudgetLedger ledger(path, BudgetLimits{}, "r", "");
  EXPECT_DOUBLE_EQ(ledger.spent_device_seconds(), 30);
}

TEST(BudgetLedger, WarnsOnceAtEightyPercent) {
  const std::string path = temp_dir("warn") + "/budget.json";
  BudgetLedger ledger(path, hours(1), "r", "", LedgerOptions{1e9});
  ledger.charge(2800);  // 77.8%
  EXPECT_NEAR(ledger.fraction_used(), 2800.0 / 3600.0, 1e-12);
  EXPECT_FALSE(ledger.should_warn());
  ledger.charge(100);  // 80.6%
  EXPECT_TRUE(ledger.should_warn());
  EXPECT_FALSE(ledger.should_warn());
  ledger.charge(500);  // 94%
  EXPECT_FALSE(ledger.should_warn());
  // No budget, no warning.
  BudgetLedger free_ledger(temp_dir("warn_none") + "/budget.json", BudgetLimits{}, "r", "");
  free_ledger.charge(1e6);
  EXPECT_FALSE(free_ledger.should_warn());
  EXPECT_EQ(free_ledger.fraction_used(), 0);
  EXPECT_FALSE(free_ledger.must_stop(1e9, 1e9));
  EXPECT_TRUE(std::isinf(free_ledger.remaining_device_seconds()));
  EXPECT_NE(free_ledger.summary().find("no budget"), std::string::npos) << free_ledger.summary();
}

TEST(BudgetLedger, ASmallBudgetShowsTwoSignificantDigits) {
  BudgetLimits one_minute;
  one_minute.device_hours = 1.0 / 60;
  BudgetLedger ledger(temp_dir("small") + "/budget.json", one_minute, "r", "", LedgerOptions{1e9});
  ledger.charge(30);
  EXPECT_NE(ledger.summary().find("spent 0.008 of 0.017 device-hours"), std::string::npos)
      << ledger.summary();
  BudgetLedger hours_ledger(temp_dir("hours") + "/budget.json", hours(2), "r", "",
                            LedgerOptions{1e9});
  EXPECT_NE(hours_ledger.summary().find("spent 0.00 of 2.00 device-hours"), std::string::npos)
      << hours_ledger.summary();
}

TEST(BudgetLedger, MustStopBeforeTheBudgetWouldBeExceeded) {
  const std::string path = temp_dir("stop") + "/budget.json";
  BudgetLedger ledger(path, hours(1, /*reserve=*/60), "r", "", LedgerOptions{30});
  ledger.charge(3000);
  EXPECT_FALSE(ledger.must_stop(10, 100));  // 600 left, 170 needed
  ledger.charge(420);
  EXPECT_FALSE(ledger.must_stop(10, 100));  // 180 left, 170 needed
  ledger.charge(20);
  EXPECT_TRUE(ledger.must_stop(10, 100));  // 160 left

  // A training loop obeying must_stop never overruns: steps of 7 s (the moving average of
  // slightly varying steps), then 30 s of final save and eval.
  const std::string loop_path = temp_dir("stop_loop") + "/budget.json";
  BudgetLedger loop(loop_path, hours(1, 60), "r", "", LedgerOptions{60});
  MovingAverage step_time;
  int steps = 0;
  while (true) {
    const double estimate = step_time.count() ? step_time.value() : 7.5;
    if (loop.must_stop(estimate, 30)) break;
    const double this_step = 7.0 + 0.5 * double(steps % 2);
    loop.charge(this_step);
    step_time.add(this_step);
    ++steps;
  }
  loop.charge(30);
  // Within the budget; the reserve absorbed the misestimate of the last step.
  EXPECT_LE(loop.spent_device_seconds(), 3600);
  EXPECT_GE(loop.spent_device_seconds(), 3600 - 60 - 8);  // no budget wasted either
  EXPECT_GT(steps, 400);
}

TEST(BudgetLedger, SeveralDevicesSpendTheBudgetFaster) {
  BudgetLimits l = hours(1, 0);
  l.devices = 4;
  BudgetLedger ledger(temp_dir("devices") + "/budget.json", l, "r", "");
  ledger.charge(450);  // wall seconds: 1800 device-seconds
  EXPECT_DOUBLE_EQ(ledger.spent_device_seconds(), 1800);
  EXPECT_DOUBLE_EQ(ledger.remaining_wall_seconds(), 450);
  EXPECT_FALSE(ledger.must_stop(400, 50));
  EXPECT_TRUE(ledger.must_stop(400, 51));
  EXPECT_EQ(ledger.session().devices, 4);
}

TEST(BudgetLedger, MoneyBudgetsThroughThePrice) {
  const std::string path = temp_dir("usd") + "/budget.json";
  BudgetLimits l;
  l.usd = 1.70;
  l.price_per_hour = 0.85;  // $1.70 buys 2 device-hours
  l.devices = 2;
  l.reserve_seconds = 0;
  {
    BudgetLedger ledger(path, l, "r", "tuning");
    EXPECT_NEAR(ledger.remaining_device_seconds(), 7200, 1e-9);
    ledger.charge(1800);  // 3600 device-seconds: $0.85
    EXPECT_NEAR(ledger.spent_usd(), 0.85, 1e-12);
    EXPECT_NEAR(ledger.fraction_used(), 0.5, 1e-12);
    EXPECT_NEAR(ledger.remaining_wall_seconds(), 1800, 1e-9);
    EXPECT_TRUE(ledger.must_stop(1800.5, 0));
    EXPECT_FALSE(ledger.must_stop(1799, 0));
    EXPECT_NE(ledger.summary().find("$0.85 of $1.70"), std::string::npos) << ledger.summary();
  }
  // A session on a pricier machine: what is left of the money buys less time there.
  l.price_per_hour = 1.70;
  l.devices = 1;
  l.usd = 0;  // no flags: the ledger's $1.70 applies
  BudgetLedger ledger(path, l, "r", "full");
  EXPECT_DOUBLE_EQ(ledger.limits().usd, 1.70);
  EXPECT_NEAR(ledger.remaining_device_seconds(), 1800, 1e-9);
  // Both limits: the tighter one decides.
  l.usd = 3.40;          // 2 device-hours at $1.70, minus the one spent
  l.device_hours = 1.1;  // 3960 s, minus the 3600 spent: the tighter
  BudgetLedger both(temp_dir("usd_both") + "/b.json", l, "r", "");
  both.charge(3600);
  EXPECT_NEAR(both.remaining_device_seconds(), 360, 1e-9);

  // A money budget in the file and no price for this session: an error, nothing recorded.
  expect_invalid([&] { BudgetLedger bad(path, BudgetLimits{}, "r", ""); },
                 {path, "$1.70", "--price-per-hour"});
  EXPECT_EQ(read_ledger(path).sessions.size(), 2u);
}

TEST(BudgetLedger, ConcurrentRunsSharingALedgerKeepEachOthersSessions) {
  const std::string path = temp_dir("shared") + "/ledger.json";
  BudgetLedger a(path, hours(10), "sweep-1", "tuning", LedgerOptions{1e9});
  BudgetLedger b(path, BudgetLimits{}, "sweep-2", "tuning", LedgerOptions{1e9});
  a.charge(100);
  b.charge(250);
  a.flush();
  b.flush();
  a.flush();  // a now sees b's time
  EXPECT_DOUBLE_EQ(a.spent_device_seconds(), 350);
  EXPECT_DOUBLE_EQ(b.spent_device_seconds(), 350);
  EXPECT_DOUBLE_EQ(b.limits().device_hours, 10);
  a.close();
  b.close();
  const LedgerData d = read_ledger(path);
  ASSERT_EQ(d.sessions.size(), 2u);
  EXPECT_EQ(d.sessions[0].run, "sweep-1");
  EXPECT_EQ(d.sessions[1].run, "sweep-2");
  EXPECT_DOUBLE_EQ(d.spent_device_seconds(), 350);
}

TEST(BudgetLedger, ProjectionOfTimeAndCostToFinish) {
  BudgetLimits l = hours(1, 120);
  l.price_per_hour = 2;
  BudgetLedger ledger(temp_dir("projection") + "/budget.json", l, "r", "");
  Projection p = ledger.projection(100, 1000, 3.0);
  EXPECT_EQ(p.steps_left, 900);
  EXPECT_DOUBLE_EQ(p.wall_seconds, 2700);
  EXPECT_DOUBLE_EQ(p.usd, 1.5);
  EXPECT_EQ(p.steps_affordable, 1160);  // (3600 - 120) / 3
  EXPECT_TRUE(p.fits);
  p = ledger.projection(100, 1000, 4.0, /*final_seconds=*/40);
  EXPECT_DOUBLE_EQ(p.wall_seconds, 3640);
  EXPECT_EQ(p.steps_affordable, 860);  // (3600 - 120 - 40) / 4
  EXPECT_FALSE(p.fits);
  ledger.charge(600);
  p = ledger.projection(0, 10, 1.0);
  EXPECT_DOUBLE_EQ(p.total_device_seconds, 610);
  EXPECT_NEAR(p.total_usd, 610.0 / 3600.0 * 2, 1e-12);
  EXPECT_TRUE(p.fits);
}

TEST(BudgetLedger, ChargeElapsedUsesTheWallClock) {
  BudgetLedger ledger(temp_dir("elapsed") + "/budget.json", hours(1), "r", "");
  ::usleep(20000);
  ledger.charge_elapsed();
  const double first = ledger.spent_device_seconds();
  EXPECT_GE(first, 0.019);
  EXPECT_LT(first, 5);
  ledger.charge_elapsed();
  EXPECT_LT(ledger.spent_device_seconds() - first, 1);  // only the time since the last call
}

TEST(MovingAverage, SeedsWithTheFirstValueAndFollowsChanges) {
  MovingAverage avg(3);  // alpha = 0.5
  EXPECT_EQ(avg.count(), 0);
  avg.add(10);
  EXPECT_DOUBLE_EQ(avg.value(), 10);
  avg.add(20);
  EXPECT_DOUBLE_EQ(avg.value(), 15);
  for (int i = 0; i < 40; ++i) avg.add(2);
  EXPECT_NEAR(avg.value(), 2, 1e-6);
}

}  // namespace
}  // namespace hg::train
