#include "hourglass/train/run/run_history.h"

#include "hourglass/base/file_check.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"

namespace hg::train {

namespace {

using ordered_json = nlohmann::ordered_json;

[[noreturn]] void throw_io(const std::string& path, const std::string& what) {
  throw_runtime(fmt::format("cannot {} {}: {}", what, path, std::strerror(errno)),
                "check that the run directory is writable and has free space");
}

double number(const ordered_json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

EpochMetrics from_json(const ordered_json& j) {
  EpochMetrics m;
  m.epoch = int64_t(number(j, "epoch"));
  m.train_loss = number(j, "train_loss");
  m.train_acc = number(j, "train_acc");
  m.evaluated = j.contains("test_acc");
  m.test_loss = number(j, "test_loss");
  m.test_acc = number(j, "test_acc");
  m.test_top5 = j.contains("test_top5") ? number(j, "test_top5") : -1.0;
  m.has_validation = j.contains("val_acc");
  m.val_loss = number(j, "val_loss");
  m.val_acc = number(j, "val_acc");
  m.val_top5 = j.contains("val_top5") ? number(j, "val_top5") : -1.0;
  m.ema_val_acc = j.contains("ema_val_acc") ? number(j, "ema_val_acc") : -1.0;
  m.ema_test_loss = j.contains("ema_test_loss") ? number(j, "ema_test_loss") : -1.0;
  m.ema_test_acc = j.contains("ema_test_acc") ? number(j, "ema_test_acc") : -1.0;
  m.images_per_s = number(j, "images_per_s");
  m.epoch_seconds = number(j, "epoch_seconds");
  m.lr = number(j, "lr");
  m.checkpoint_seconds = number(j, "checkpoint_seconds");
  m.data_wait_seconds = number(j, "data_wait_seconds");
  m.planning_seconds = number(j, "planning_seconds");
  m.peak_memory_mib = number(j, "peak_memory_mib");
  m.reserved_memory_mib = number(j, "reserved_memory_mib");
  m.memory_fragmentation = number(j, "memory_fragmentation");
  return m;
}

}  // namespace

int64_t epochs_without_improvement(const std::vector<EpochMetrics>& history, double min_delta) {
  double best = 0;
  int64_t stale = 0;
  for (size_t i = 0; i < history.size(); ++i) {
    const EpochMetrics& m = history[i];
    if (!m.has_validation) return 0;
    if (i == 0 || m.val_acc > best + min_delta) {
      best = std::max(best, m.val_acc);
      stale = 0;
    } else {
      ++stale;
    }
  }
  return stale;
}

std::vector<std::pair<std::string, double>> epoch_record(const EpochMetrics& m) {
  std::vector<std::pair<std::string, double>> r = {
      {"epoch", double(m.epoch)}, {"train_loss", m.train_loss}, {"train_acc", m.train_acc}};
  if (m.evaluated && m.has_validation) {
    r.emplace_back("val_loss", m.val_loss);
    r.emplace_back("val_acc", m.val_acc);
    if (m.val_top5 >= 0) r.emplace_back("val_top5", m.val_top5);
  }
  if (m.evaluated) {
    r.insert(r.end(), {{"test_loss", m.test_loss}, {"test_acc", m.test_acc}});
    if (m.test_top5 >= 0) r.emplace_back("test_top5", m.test_top5);
    if (m.ema_val_acc >= 0) r.emplace_back("ema_val_acc", m.ema_val_acc);
    if (m.ema_test_acc >= 0)
      r.insert(r.end(), {{"ema_test_loss", m.ema_test_loss}, {"ema_test_acc", m.ema_test_acc}});
  }
  r.insert(r.end(), {{"images_per_s", m.images_per_s},
                     {"epoch_seconds", m.epoch_seconds},
                     {"lr", m.lr},
                     {"checkpoint_seconds", m.checkpoint_seconds},
                     {"data_wait_seconds", m.data_wait_seconds},
                     {"planning_seconds", m.planning_seconds},
                     {"peak_memory_mib", m.peak_memory_mib},
                     {"reserved_memory_mib", m.reserved_memory_mib},
                     {"memory_fragmentation", m.memory_fragmentation}});
  return r;
}

std::string epoch_record_json(const EpochMetrics& m) {
  return metrics_record_json(epoch_record(m));
}

std::string metrics_record_json(const std::vector<std::pair<std::string, double>>& values) {
  // The same encoding as obs::MetricsJsonl: integral values as integers, non-finite as null.
  ordered_json record = ordered_json::object();
  for (const auto& [name, value] : values) {
    if (!std::isfinite(value))
      record[name] = nullptr;
    else if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0)
      record[name] = int64_t(value);
    else
      record[name] = value;
  }
  return record.dump();
}

std::vector<EpochMetrics> reconcile_metrics_file(const std::string& path, int64_t completed_epochs,
                                                 const std::string& last_record) {
  std::vector<std::string> kept;
  std::vector<EpochMetrics> epochs;
  std::set<int64_t> seen;
  bool changed = false;
  if (std::filesystem::exists(path)) {
    require_regular_file(path, "metrics file");  // a FIFO would block the resume
    std::ifstream in(path);
    if (!in) throw_io(path, "read metrics file");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      ordered_json j = ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {  // a line cut short by a kill
        changed = true;
        continue;
      }
      auto it = j.find("epoch");
      if (it == j.end() || !it->is_number()) {  // not an epoch line: keep
        kept.push_back(line);
        continue;
      }
      const int64_t epoch = it->get<int64_t>();
      if (epoch < 1 || epoch > completed_epochs || !seen.insert(epoch).second) {
        changed = true;
        continue;
      }
      kept.push_back(line);
      epochs.push_back(from_json(j));
    }
  }
  if (completed_epochs > 0 && !seen.count(completed_epochs) && !last_record.empty()) {
    ordered_json j = ordered_json::parse(last_record, nullptr, false);
    if (j.is_object()) {
      kept.push_back(last_record);
      epochs.push_back(from_json(j));
      changed = true;
    }
  }
  if (changed) {
    HG_LOG_INFO(
        "{}: rewritten to one line for each of the {} epoch(s) the checkpoint covers "
        "(lines of work done again, or cut short, dropped)",
        path, completed_epochs);
    std::string text;
    for (const std::string& l : kept) text += l + "\n";
    write_file_atomic(path, text);
  }
  return epochs;
}

}  // namespace hg::train
