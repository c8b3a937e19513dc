#include "hourglass/train/plan.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/duration.h"
#include "hourglass/base/error.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::train {

namespace {

constexpr const char* kTableRemedy =
    "see configs/prices.example.toml for the format: [[platform]] entries with name, "
    "price_per_hour (USD per device-hour) and relative_speed (1 = the machine measured)";

[[noreturn]] void bad_table(const std::string& where, const std::string& why) {
  throw_invalid(fmt::format("price table {}: {}", where, why), kTableRemedy);
}

// Checks one row's values and that its name is new; `where` is "file entry N" or "file:line".
void check_row(const PricedPlatform& p, const std::string& where, std::set<std::string>& names) {
  if (p.name.empty()) bad_table(where, "the platform name is empty");
  if (!std::isfinite(p.price_per_hour) || p.price_per_hour < 0)
    bad_table(where, fmt::format("price_per_hour of '{}' must be a non-negative number", p.name));
  if (!std::isfinite(p.relative_speed) || p.relative_speed <= 0)
    bad_table(where, fmt::format("relative_speed of '{}' must be a positive number", p.name));
  if (!names.insert(p.name).second)
    bad_table(where, fmt::format("platform '{}' is listed twice", p.name));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

double csv_number(std::string_view field, const std::string& where, const char* column) {
  if (!field.empty() && field.front() == '$') field.remove_prefix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size())
    bad_table(where, fmt::format("{} '{}' is not a number", column, untrusted_excerpt(field)));
  return v;
}

std::string hours_text(double hours) {
  if (hours >= 100) return fmt::format("{:.0f}", hours);
  if (hours >= 1) return fmt::format("{:.2f}", hours);
  if (hours >= 0.01 || hours == 0) return fmt::format("{:.3f}", hours);
  return fmt::format("{:.2g}", hours);  // two significant digits rather than "0.000"
}

std::string money_text(double usd) {
  if (usd > 0 && usd < 0.005) return "<$0.01";  // rather than a misleading "$0.00"
  return fmt::format("${:.2f}", usd);
}

}  // namespace

std::vector<PricedPlatform> parse_price_table_toml(std::string_view text,
                                                   const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    bad_table(fmt::format("{}:{}:{}", source, e.source().begin.line, e.source().begin.column),
              std::string(e.description()));
  }
  const toml::array* entries = root["platform"].as_array();
  if (!entries || entries->empty()) bad_table(source, "it has no [[platform]] entries");
  std::vector<PricedPlatform> table;
  std::set<std::string> names;
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string where = fmt::format("{} [[platform]] entry {}", source, i + 1);
    const toml::table* t = (*entries)[i].as_table();
    if (!t) bad_table(where, "it is not a table");
    // Unknown keys are errors: a misspelt price would otherwise silently read as missing.
    for (const auto& [key, value] : *t) {
      const std::string_view k = key.str();
      if (k != "name" && k != "price_per_hour" && k != "relative_speed" && k != "note")
        bad_table(where, fmt::format("unknown key '{}' (known: name, price_per_hour, "
                                     "relative_speed, note)",
                                     k));
    }
    PricedPlatform p;
    const auto name = (*t)["name"].value<std::string>();
    if (!name) bad_table(where, "it needs name = \"...\" (a string)");
    p.name = *name;
    const auto price = (*t)["price_per_hour"].value<double>();
    if (!price) bad_table(where, fmt::format("'{}' needs price_per_hour = <number>", p.name));
    p.price_per_hour = *price;
    if (t->contains("relative_speed")) {
      const auto speed = (*t)["relative_speed"].value<double>();
      if (!speed) bad_table(where, fmt::format("relative_speed of '{}' must be a number", p.name));
      p.relative_speed = *speed;
    }
    check_row(p, where, names);
    table.push_back(std::move(p));
  }
  return table;
}

std::vector<PricedPlatform> parse_price_table_csv(std::string_view text,
                                                  const std::string& source) {
  std::vector<PricedPlatform> table;
  std::set<std::string> names;
  bool header_seen = false;
  size_t line_number = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t newline = text.find('\n', pos);
    const std::string_view line = trim(text.substr(
        pos, newline == std::string_view::npos ? std::string_view::npos : newline - pos));
    pos = newline == std::string_view::npos ? text.size() + 1 : newline + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    const std::string where = fmt::format("{}:{}", source, line_number);
    const auto fields = split_commas(line);
    if (!header_seen) {
      if (fields.size() < 2 || fields[0] != "platform" || fields[1] != "price_per_hour" ||
          (fields.size() >= 3 && fields[2] != "relative_speed") || fields.size() > 3)
        bad_table(where,
                  "the first line must be the header platform,price_per_hour,relative_speed");
      header_seen = true;
      continue;
    }
    if (fields.size() < 2 || fields.size() > 3)
      bad_table(where,
                fmt::format("expected 2 or 3 comma-separated fields, found {}", fields.size()));
    PricedPlatform p;
    p.name = std::string(fields[0]);
    p.price_per_hour = csv_number(fields[1], where, "price_per_hour");
    if (fields.size() == 3) p.relative_speed = csv_number(fields[2], where, "relative_speed");
    check_row(p, where, names);
    table.push_back(std::move(p));
  }
  if (table.empty()) bad_table(source, "it lists no platforms");
  return table;
}

std::vector<PricedPlatform> load_price_table(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw_invalid(
        fmt::format("price table {} does not exist or is not a file", path),
        "check the path given to --price-table; configs/prices.example.toml is an example");
  const std::string ext = std::filesystem::path(path).extension().string();
  std::string text;
  try {
    text = read_file_bytes(path);
  } catch (const Error& e) {
    throw_invalid(e.message(), e.remedy());
  }
  if (ext == ".toml") return parse_price_table_toml(text, path);
  if (ext == ".csv") return parse_price_table_csv(text, path);
  throw_invalid(fmt::format("price table {}: unknown format '{}'", path, ext),
                "name the file .toml or .csv");
}

PlatformPlan plan_platform(const PlanInput& in, const PricedPlatform& platform) {
  HG_CHECK(std::isfinite(in.train_images_per_s) && in.train_images_per_s > 0,
           "cannot plan with a training throughput of {} images/s", in.train_images_per_s);
  HG_CHECK(platform.relative_speed > 0, "cannot plan for platform '{}' with relative speed {}",
           platform.name, platform.relative_speed);
  PlatformPlan p;
  p.platform = platform;
  const double speed = platform.relative_speed;
  p.seconds_per_epoch = double(in.train_images) / (in.train_images_per_s * speed) +
                        double(in.eval_images) / (in.effective_eval_images_per_s() * speed) +
                        in.checkpoint_seconds;
  p.seconds = p.seconds_per_epoch * double(in.epochs);
  p.device_hours = p.seconds / 3600.0;
  p.cost = p.device_hours * platform.price_per_hour;
  if (!in.has_budget()) {
    p.epochs_in_budget = std::numeric_limits<int64_t>::max();
    p.fits = true;
    return p;
  }
  // Seconds the budget buys on this platform: the tighter of the time and money limits (money
  // does not limit a free platform).
  double available = std::numeric_limits<double>::infinity();
  if (in.budget_device_hours > 0) available = in.budget_device_hours * 3600.0;
  if (in.budget_usd > 0 && platform.price_per_hour > 0)
    available = std::min(available, in.budget_usd / platform.price_per_hour * 3600.0);
  available -= in.reserve_seconds;
  if (!std::isfinite(available) || p.seconds_per_epoch <= 0)
    p.epochs_in_budget = std::numeric_limits<int64_t>::max();
  else if (available <= 0)
    p.epochs_in_budget = 0;
  else
    p.epochs_in_budget = int64_t(std::min(std::floor(available / p.seconds_per_epoch), 9e18));
  p.fits = p.seconds <= available;
  return p;
}

std::string format_plan_table(const std::vector<PlatformPlan>& plans, bool has_budget) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"platform", "price/h", "speed", "hours", "time", "total cost", "epochs in budget",
                  "fits budget"});
  for (const PlatformPlan& p : plans) {
    const bool unlimited = p.epochs_in_budget == std::numeric_limits<int64_t>::max();
    rows.push_back({p.platform.name, fmt::format("${:.2f}", p.platform.price_per_hour),
                    fmt::format("{:g}x", p.platform.relative_speed), hours_text(p.device_hours),
                    format_duration_clock(p.seconds), money_text(p.cost),
                    !has_budget ? "-"
                    : unlimited ? "unlimited"
                                : std::to_string(p.epochs_in_budget),
                    !has_budget ? "-"
                    : p.fits    ? "yes"
                                : "no"});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      // The name left-aligned, numbers right-aligned so their digits line up.
      line += c == 0 ? fmt::format("{:<{}}", row[c], width[c])
                     : fmt::format("  {:>{}}", row[c], width[c]);
    }
    out += line + "\n";
  }
  return out;
}

int64_t standard_split_size(const std::string& dataset, bool train, int64_t limit) {
  int64_t n = 0;
  if (dataset == "fashion-mnist" || dataset == "mnist")
    n = train ? 60000 : 10000;
  else if (dataset == "cifar10" || dataset == "cifar100")
    n = train ? 50000 : 10000;
  if (n > 0 && limit > 0) n = std::min(n, limit);
  return n;
}

}  // namespace hg::train
