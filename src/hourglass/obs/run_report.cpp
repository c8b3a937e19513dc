#include "hourglass/obs/run_report.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hourglass/base/config.h"
#include "hourglass/base/error.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/untrusted_text.h"

namespace hg::obs {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Deeper JSON than this in one line is refused before parsing (the parser recurses).
constexpr int kMaxJsonDepth = 16;

// The lines of a regular file; false when it is missing or not a regular file (noted then).
bool read_lines(const std::string& path, const std::string& label, std::vector<std::string>& notes,
                std::vector<std::string>& lines) {
  const std::string kind = file_kind(path);
  if (kind.empty()) return false;
  if (kind != "a regular file") {
    notes.push_back(fmt::format("{} is {}, not a regular file; left out", label, kind));
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    notes.push_back(fmt::format("{} cannot be opened; left out", label));
    return false;
  }
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return true;
}

std::string skipped(const std::string& label, size_t line, const std::string& why) {
  return fmt::format("{} line {}: {}; skipped (a run stopped mid-write leaves a partial last line)",
                     label, line, why);
}

// Splits one CSV line (quoted cells may hold commas and "" for a quote); false when a quote is
// left open.
bool split_csv(const std::string& line, std::vector<std::string>& cells) {
  cells.assign(1, "");
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return !quoted;
}

// The number `cell` holds in full, else NaN.
double parse_number(const std::string& cell) {
  if (cell.empty()) return std::nan("");
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  return end == cell.c_str() + cell.size() ? v : std::nan("");
}

double mtime_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9;
}

// The first line of a small text file, trimmed ("" when unreadable).
std::string first_line(const std::string& path) {
  if (file_kind(path) != "a regular file") return "";
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::vector<CheckpointEntry> read_checkpoints(const std::string& dir,
                                              std::vector<std::string>& notes) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    notes.push_back("no checkpoints/ folder: the run wrote no checkpoint");
    return out;
  }
  const std::string last = fs::path(first_line(dir + "/last")).filename().string();
  const std::string best = fs::path(first_line(dir + "/best")).filename().string();
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    constexpr std::string_view prefix = "step-", suffix = ".safetensors";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char d) { return d >= '0' && d <= '9'; }))
      continue;
    CheckpointEntry c;
    c.file = name;
    c.step = std::stoll(digits);
    c.mtime_unix = mtime_of(e.path().string());
    c.size_mb = double(fs::file_size(e.path(), ec)) / 1e6;
    c.last = name == last;
    c.best = name == best;
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  if (out.empty()) notes.push_back("checkpoints/ holds no step-*.safetensors");
  return out;
}

void read_config(const std::string& path, RunReport& r) {
  std::vector<std::string> lines;
  if (!read_lines(path, "config.toml", r.notes, lines)) {
    r.notes.push_back("no config.toml: the config section is left out");
    return;
  }
  for (const std::string& line : lines) r.config_text += line + "\n";
  try {
    const Config c = Config::parse(r.config_text, path);
    r.name = c.get_string("name", "");
    r.planned_epochs = c.get_int("train.epochs", 1);
    // A reinforcement-learning run's records are its iterations: known when config.toml names
    // the three sizes (their defaults live with the trainer, which this layer does not see).
    if (c.has("rl.total_steps") || c.has("rl.env")) {
      r.planned_epochs = 0;
      if (c.has("rl.total_steps") && c.has("rl.num_envs") && c.has("rl.num_steps")) {
        const int64_t per = c.get_int("rl.num_envs", 0) * c.get_int("rl.num_steps", 0);
        if (per > 0) r.planned_epochs = c.get_int("rl.total_steps", 0) / per;
      }
    }
    for (const std::string& line : lines) {
      if (line.empty() || line[0] != '#') break;
      r.config_resolved += line + "\n";
    }
    // to_toml's own header (comments naming this parse, then a blank line) gives way to the file's.
    const std::string printed = c.to_toml();
    const size_t body = printed.find("\n\n");
    if (!r.config_resolved.empty()) r.config_resolved += "\n";
    r.config_resolved += body == std::string::npos ? printed : printed.substr(body + 2);
  } catch (const Error& e) {
    r.notes.push_back("config.toml could not be read as TOML (" + untrusted_excerpt(e.message()) +
                      "): the planned epochs are unknown");
  }
}

}  // namespace

double field_of(const Record& record, const std::string& name) {
  const auto it = record.find(name);
  return it == record.end() ? std::nan("") : it->second;
}

std::vector<Record> read_jsonl_records(const std::string& path, const std::string& label,
                                       std::vector<std::string>& notes) {
  std::vector<std::string> lines;
  std::vector<Record> out;
  if (!read_lines(path, label, notes, lines)) return out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (find_json_nesting_beyond(line, kMaxJsonDepth) != std::string::npos) {
      notes.push_back(skipped(label, i + 1, "nests too deep"));
      continue;
    }
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      notes.push_back(skipped(label, i + 1, "not a JSON object"));
      continue;
    }
    Record r;
    for (const auto& item : j.items())
      if (item.value().is_number()) r[item.key()] = item.value().get<double>();
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Record> read_csv_records(const std::string& path, const std::string& label,
                                     std::vector<std::string>& notes,
                                     const std::string& text_column_name,
                                     std::string* text_column) {
  std::vector<std::string> lines;
  std::vector<Record> out;
  if (!read_lines(path, label, notes, lines) || lines.empty()) return out;
  std::vector<std::string> header, cells;
  if (!split_csv(lines[0], header)) {
    notes.push_back(fmt::format("{} line 1: the header is not CSV; the file is left out", label));
    return out;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    if (!split_csv(lines[i], cells) || cells.size() != header.size()) {
      notes.push_back(
          skipped(label, i + 1,
                  fmt::format("{} cells where the header has {}", cells.size(), header.size())));
      continue;
    }
    Record r;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (text_column && header[c] == text_column_name && text_column->empty())
        *text_column = cells[c];
      const double v = parse_number(cells[c]);
      if (std::isfinite(v)) r[header[c]] = v;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<ProfileTable> parse_profile_json(const std::string& text, const std::string& label,
                                               std::vector<std::string>& notes) {
  auto refuse = [&](const std::string& why) -> std::optional<ProfileTable> {
    notes.push_back(fmt::format(
        "{} is not `hourglass profile --json` output ({}); the profile section is left out", label,
        why));
    return std::nullopt;
  };
  if (find_json_nesting_beyond(text, kMaxJsonDepth) != std::string::npos)
    return refuse("nests too deep");
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return refuse("not a JSON object");
  if (!j.contains("rows") || !j["rows"].is_array()) return refuse("no 'rows' array");
  ProfileTable t;
  auto num = [](const json& o, const char* key) {
    return o.contains(key) && o[key].is_number() ? o[key].get<double>() : 0.0;
  };
  auto str = [](const json& o, const char* key) {
    return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
  };
  t.device = str(j, "device");
  t.steps = int64_t(num(j, "steps"));
  t.step_ms = num(j, "step_ms");
  t.ops_ms = num(j, "ops_ms");
  t.ops_share = num(j, "ops_share");
  for (const json& row : j["rows"]) {
    if (!row.is_object() || !row.contains("op") || !row["op"].is_string())
      return refuse("a row without an 'op' name");
    t.rows.push_back({row["op"].get<std::string>(), str(row, "parent"), int64_t(num(row, "calls")),
                      num(row, "total_ms"), num(row, "min_ms"), num(row, "max_ms")});
  }
  return t;
}

RunReport read_run_report(const std::string& run_dir) {
  const std::string kind = file_kind(run_dir);
  if (kind.empty())
    throw_invalid(fmt::format("run directory {} does not exist", run_dir),
                  "give the --run-dir of a training run (a folder holding metrics.jsonl)");
  if (kind != "a directory")
    throw_invalid(fmt::format("run directory {} is {}, not a directory", run_dir, kind),
                  "give the --run-dir of a training run (a folder holding metrics.jsonl)");
  RunReport r;
  r.run_dir = run_dir;
  read_config(run_dir + "/config.toml", r);
  if (r.name.empty()) r.name = fs::path(run_dir).lexically_normal().filename().string();
  if (r.name.empty()) r.name = fs::absolute(run_dir).parent_path().filename().string();
  r.epochs = read_jsonl_records(run_dir + "/metrics.jsonl", "metrics.jsonl", r.notes);
  r.steps = read_jsonl_records(run_dir + "/steps.jsonl", "steps.jsonl", r.notes);
  if (r.epochs.empty() && r.steps.empty())
    throw_invalid(
        fmt::format("run directory {} holds no metrics: neither metrics.jsonl nor steps.jsonl "
                    "has a readable record",
                    run_dir),
        "give the --run-dir of a training run that has written at least one step record "
        "(metrics.every_steps) or finished an epoch");
  if (r.epochs.empty())
    r.notes.push_back("metrics.jsonl has no epoch yet: the epoch curves are empty");
  if (r.steps.empty()) r.notes.push_back("no steps.jsonl records (metrics.every_steps = 0?)");
  r.monitor =
      read_csv_records(run_dir + "/monitor.csv", "monitor.csv", r.notes, "gpu_name", &r.gpu_name);
  if (r.monitor.empty())
    r.notes.push_back(
        "no monitor.csv rows (monitor.every_seconds = 0?): the device charts are left out");
  r.checkpoints = read_checkpoints(run_dir + "/checkpoints", r.notes);
  r.has_final = file_kind(run_dir + "/final.safetensors") == "a regular file";
  std::vector<std::string> profile_lines;
  if (read_lines(run_dir + "/profile.json", "profile.json", r.notes, profile_lines)) {
    std::string text;
    for (const std::string& line : profile_lines) text += line + "\n";
    r.profile = parse_profile_json(text, "profile.json", r.notes);
  }
  return r;
}

}  // namespace hg::obs
