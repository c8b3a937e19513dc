// A run directory read back for `hourglass report` (report_html.h draws it): the config, the
// epoch and step records, the device monitor's rows, the checkpoints and an op profile. Reading
// never fails on a bad line: a run killed mid-write leaves a partial last line, so a line that
// cannot be read is skipped and named (file and line) in `notes`. Missing optional files leave
// their part empty, also with a note. The budget ledger is read by the caller (train/run/budget.h
// owns its format) and handed in as `RunReport::budget`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hg::obs {

// One line of a JSON-lines file or one row of a CSV file: its numeric fields (an empty CSV cell
// is absent; text cells are not kept).
using Record = std::map<std::string, double>;

// The field's value, or NaN when the record lacks it.
double field_of(const Record& record, const std::string& name);

struct CheckpointEntry {
  std::string file;       // its name in checkpoints/
  int64_t step = 0;       // from the name, step-<step>.safetensors
  double mtime_unix = 0;  // when it was written (the file's modification time)
  double size_mb = 0;
  bool last = false, best = false;  // named by checkpoints/last, checkpoints/best
};

// `hourglass profile CONFIG --json` output, saved as RUN_DIR/profile.json.
struct ProfileRow {
  std::string op, parent;
  int64_t calls = 0;
  double total_ms = 0, min_ms = 0, max_ms = 0;
};
struct ProfileTable {
  std::string device;
  int64_t steps = 0;
  double step_ms = 0, ops_ms = 0, ops_share = 0;
  std::vector<ProfileRow> rows;
};

// The budget ledger's sessions and limit (filled by the caller from train::read_ledger).
struct BudgetSession {
  double start_unix = 0, end_unix = 0;
  double device_seconds = 0, price_per_hour = 0;
  int devices = 1;
  std::string phase;        // --phase / budget.phase; "" when none was given
  std::string stop_reason;  // why the session ended early; "" when it did not
  bool closed = true;       // false: still running, or its process died
};
struct BudgetInfo {
  std::string path;
  double limit_device_hours = 0;  // 0: none
  double limit_usd = 0;           // 0: none
  std::vector<BudgetSession> sessions;
};

struct RunReport {
  std::string run_dir;
  std::string name;         // the config's `name`, else the folder's name
  std::string config_text;  // config.toml as written ("" when missing)
  // config.toml parsed and printed back: its leading comment lines (the source and overrides
  // Config::to_toml names), then every value as Config::to_toml prints it, floats in their
  // shortest exact form even where an older hourglass wrote 0.10000000000000001. "" when the
  // file is missing or is not TOML.
  std::string config_resolved;
  int64_t planned_epochs =
      0;  // train.epochs of config.toml (an RL run's iterations); 0 when unknown
  std::vector<Record> epochs;                // metrics.jsonl
  std::vector<Record> steps;                 // steps.jsonl
  std::vector<Record> monitor;               // monitor.csv
  std::string gpu_name;                      // monitor.csv's gpu_name, "" for none
  std::vector<CheckpointEntry> checkpoints;  // by step
  bool has_final = false;                    // final.safetensors exists
  std::optional<ProfileTable> profile;
  std::optional<BudgetInfo> budget;
  std::vector<std::string> notes;  // what could not be read, and which parts are missing
};

// Reads `run_dir`. Throws InvalidInput naming the path when it is not a directory, or when it
// holds no epoch or step record (no metrics.jsonl or steps.jsonl with a readable line).
RunReport read_run_report(const std::string& run_dir);

// The records of a JSON-lines file; `label` names the file in notes ("metrics.jsonl line 7:
// ..."). A missing file gives no records and no note.
std::vector<Record> read_jsonl_records(const std::string& path, const std::string& label,
                                       std::vector<std::string>& notes);
// The rows of a CSV file with a header; a row with a different number of cells is skipped with a
// note. With a `text_column_name`, `*text_column` receives that column's first non-empty cell.
std::vector<Record> read_csv_records(const std::string& path, const std::string& label,
                                     std::vector<std::string>& notes,
                                     const std::string& text_column_name = "",
                                     std::string* text_column = nullptr);
// profile.json's content; nullopt with a note when it is not `hourglass profile --json` output.
std::optional<ProfileTable> parse_profile_json(const std::string& text, const std::string& label,
                                               std::vector<std::string>& notes);

}  // namespace hg::obs
