// libFuzzer target: a run directory as `hourglass report` reads it (obs/run_report.h, the
// budget ledger as cmd_report.cpp finds it, report_html.h) and as `hourglass train --resume auto`
// settles where to continue (train/run/run_session.h: find_resume_point with the trainer's
// check_resumable, then adopt, or start_new when there is no checkpoint), without training.
//
// The input is a list of entries, each: a slot byte (which file: config.toml, metrics.jsonl,
// steps.jsonl, budget.json, train.log, monitor.csv, profile.json, final.safetensors,
// checkpoints/last and best, checkpoints/step-<N>.safetensors, checkpoints/discarded/..., the
// metrics CSVs, temporary files of interrupted writes, .lock, the checkpoints folder itself),
// a form byte (fuzzed text; a valid checkpoint of a small MLP whose position and fields come from
// the next bytes; a FIFO; a symbolic link to another entry, to a folder, outside the run or
// dangling; a folder), and for text a length byte and the bytes.
//
// Invariants: both steps end (a FIFO never blocks), only hg::Error escapes (InvalidInput, or
// Runtime for the file system, naming the run directory), the report changes nothing, and the
// resume deletes or replaces nothing but what it is documented to: the metric files it rewrites,
// the markers, temporary files of interrupted writes, and (start_new) metrics.csv, steps.jsonl
// and steps.csv; checkpoints newer than the one resumed from move, unchanged, to
// checkpoints/discarded/. Every other entry that existed is there afterwards, unchanged.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "hourglass/base/config.h"
#include "hourglass/base/file_check.h"
#include "hourglass/base/log.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/obs/report_html.h"
#include "hourglass/obs/run_report.h"
#include "hourglass/optim/sgd.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/budget.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/run/run_history.h"
#include "hourglass/train/run/run_session.h"

namespace {

namespace fs = std::filesystem;

constexpr int64_t kStepsPerEpoch = 4;
constexpr int64_t kBatchSize = 8;  // a checkpoint's epoch_samples is at most this per batch
constexpr const char* kTrajectory = "seed = 3\n";

using hg::fuzz::Script;

// The run a checkpoint must continue: a small MLP and SGD with momentum, as the session test
// drives.
struct Learner {
  std::shared_ptr<hg::nn::Module> model;
  hg::FlatParameters flat;
  std::unique_ptr<hg::optim::Sgd> sgd;
  Learner() {
    hg::nn::ModelSpec spec;
    spec.name = "mlp";
    spec.in_channels = 1;
    spec.height = spec.width = 2;
    spec.hidden = {3};
    spec.num_classes = 2;
    model = hg::nn::make_model(spec);
    hg::nn::initialize(*model, 3);
    flat = hg::nn::build_parameter_arena(*model, hg::nn::DecayScope::All);
    sgd = std::make_unique<hg::optim::Sgd>(flat, hg::SgdOptions{.lr = 0.1, .momentum = 0.9});
  }
};

Learner& learner() {
  static Learner l;
  return l;
}

const hg::Config& config() {
  static const hg::Config c = hg::Config::parse("name = \"fuzz\"\nseed = 3\n", "fuzz.toml");
  return c;
}

std::string step_name(int64_t step) { return fmt::format("step-{:09d}.safetensors", step); }

// The bytes of a checkpoint the run can resume from, its fields drawn from `in` (at times out of
// range, or naming a step it does not hold). Written once per distinct state, then kept.
std::string checkpoint_bytes(Script& in, int64_t& step) {
  hg::train::TrainingState s;
  const uint8_t position = in.byte(), fields = in.byte();
  s.epoch = position % 3;
  s.batch = position / 3 % 5;
  s.step = s.epoch * kStepsPerEpoch + s.batch;
  if (s.batch > 0) {
    s.samples = kBatchSize * s.batch;
    s.correct = fields % 4 == 3 ? double(s.samples + 1) : double(fields % (s.samples + 1));
    s.loss_sum = fields % 5 == 4 ? -1.0 : 0.5 * double(s.batch);
  }
  s.best_acc = fields % 3 == 0 ? -1.0 : double(fields % 3) / 2;
  if (fields & 8) s.best_checkpoint = step_name(std::max<int64_t>(0, s.step - (fields >> 6)));
  if (fields & 16 && s.epoch > 0) {
    hg::train::EpochMetrics m;
    m.epoch = s.epoch;
    m.train_loss = 1.0;
    s.last_epoch_record = hg::train::epoch_record_json(m);
  }
  s.threads = 1;
  s.config_text = fields & 32 ? "seed = 4\n" : kTrajectory;  // another run's config at times
  s.config_hash = hg::train::config_hash(s.config_text);
  step = s.step;
  const int64_t optim_step = fields & 128 ? s.step + 1 : s.step;
  const std::string key = fmt::format("{} {} {}", position, fields, optim_step);
  static std::map<std::string, std::string> made;
  if (auto it = made.find(key); it != made.end()) return it->second;
  if (made.size() >= 4096) made.clear();
  Learner& l = learner();
  hg::train::CheckpointImage image =
      hg::train::training_checkpoint_image(*l.model, *l.sgd, config(), s);
  image.metadata["hourglass.optim.step"] = std::to_string(optim_step);
  const std::string path = (hg::fuzz::scratch_dir() / "checkpoint.safetensors").string();
  hg::train::save_checkpoint_image(path, image);
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return made[key] = bytes;
}

// The name of an entry of slot `slot` (a path relative to the run directory).
std::string slot_path(uint8_t slot, Script& in) {
  static constexpr const char* kFixed[] = {"config.toml",
                                           "metrics.jsonl",
                                           "steps.jsonl",
                                           "budget.json",
                                           "train.log",
                                           "monitor.csv",
                                           "profile.json",
                                           "final.safetensors",
                                           "checkpoints/last",
                                           "checkpoints/best",
                                           "metrics.csv",
                                           "steps.csv",
                                           ".lock",
                                           "checkpoints",
                                           "metrics.jsonl.tmp.7",
                                           "checkpoints/discarded"};
  if (slot % 24 < std::size(kFixed)) return kFixed[slot % 24];
  const uint8_t n = in.byte();
  switch (slot % 24 - std::size(kFixed)) {
    case 0:
    case 1:
    case 2: return "checkpoints/" + step_name(n % 16);
    case 3: return "checkpoints/discarded/" + step_name(n % 16);
    case 4: return "checkpoints/" + step_name(n % 16) + ".tmp.3";
    case 5: return fmt::format("checkpoints/step-{}.safetensors", n % 16);  // not zero-padded
    case 6: return "checkpoints/step-" + std::string(n % 4, '9') + "x.safetensors";
    default: return "tensorboard/events.out.tfevents.1.host";
  }
}

void write_text(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// The files a resume writes (besides the checkpoints it moves).
bool written_by_resume(const std::string& path) {
  for (const char* name : {"metrics.jsonl", "metrics.csv", "steps.jsonl", "steps.csv", ".lock",
                           "checkpoints/last", "checkpoints/best"})
    if (path == name) return true;
  return false;
}

void build(Script& in, const fs::path& run, const fs::path& outside) {
  std::error_code ec;
  fs::create_directories(run);
  fs::create_directories(outside);
  write_text(outside / "elsewhere.jsonl", "{\"epoch\": 1}\n");
  std::vector<fs::path> made;
  for (int entry = 0; entry < 24 && !in.done(); ++entry) {
    const uint8_t slot = in.byte(), form = in.byte();
    const fs::path path = run / slot_path(slot, in);
    fs::create_directories(path.parent_path(), ec);
    if (fs::exists(fs::symlink_status(path, ec))) continue;
    switch (form % 8) {
      case 4: {
        int64_t step = 0;
        try {
          write_text(path, checkpoint_bytes(in, step));
        } catch (const hg::Error& e) {
          hg::fuzz::check(false, "a valid checkpoint could not be written", e.what());
        }
        break;
      }
      case 5: ::mkfifo(path.c_str(), 0644); break;
      case 6: {
        // A link in place of a file the resume writes, or of the folders it writes in, points
        // out of the run directory, or nowhere: the metric files are opened for appending
        // through links (O_CREAT), and checkpoints/ as a link into the run would give its files
        // two names here; either would change entries as the user asked.
        const uint8_t which = in.byte();
        const std::string name = path.lexically_relative(run).string();
        const bool leave =
            written_by_resume(name) || name == "checkpoints" || name == "checkpoints/discarded";
        fs::path target;
        switch (leave ? which % 3 : which % 5) {
          case 0: target = outside / "elsewhere.jsonl"; break;
          case 1: target = "missing"; break;
          case 2: target = outside; break;
          case 3: target = "."; break;
          default:
            if (made.empty()) continue;
            target = made[which / 5 % made.size()];
        }
        fs::create_symlink(target, path, ec);
        break;
      }
      case 7: fs::create_directory(path, ec); break;
      default: {
        std::string text;
        if (form % 8 == 3) text = "{\"epoch\": " + std::to_string(in.byte() % 4) + ", ";
        for (int i = in.byte() % 64; i > 0; --i) text.push_back(char(in.byte()));
        write_text(path, text);
      }
    }
    if (fs::exists(fs::symlink_status(path, ec))) made.push_back(path);
  }
}

// What an entry is: its type, and its bytes (a regular file) or its target (a link).
struct Entry {
  fs::file_type type;
  std::string content;
  bool operator==(const Entry&) const = default;
};
using Snapshot = std::map<std::string, Entry>;  // by path relative to the run directory

Snapshot snapshot(const fs::path& run) {
  Snapshot s;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(run, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    Entry e{st.type(), {}};
    if (st.type() == fs::file_type::regular) {
      std::ifstream in(it->path(), std::ios::binary);
      e.content.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else if (st.type() == fs::file_type::symlink) {
      e.content = fs::read_symlink(it->path(), ec).string();
    }
    s[it->path().lexically_relative(run).string()] = e;
  }
  return s;
}

// The report as `hourglass report` makes it (cmd_report.cpp's read_budget, less its notes).
void report(const std::string& run) {
  hg::obs::RunReport r = hg::obs::read_run_report(run);
  std::string ledger = run + "/budget.json";
  try {
    const std::string configured =
        hg::Config::parse(r.config_text, run + "/config.toml").get_string("budget.ledger", "");
    if (!configured.empty()) ledger = run + "/" + configured;  // kept inside the run
  } catch (const hg::Error&) {
  }
  if (!hg::file_kind(ledger).empty()) {
    try {
      const hg::train::LedgerData data = hg::train::read_ledger(ledger);
      hg::obs::BudgetInfo info;
      info.path = ledger;
      info.limit_device_hours = data.budget_device_hours;
      for (const hg::train::LedgerSession& s : data.sessions)
        info.sessions.push_back({0, 0, s.device_seconds, s.price_per_hour, s.devices, s.phase,
                                 s.stop_reason, s.closed});
      r.budget = info;
    } catch (const hg::Error& e) {
      hg::fuzz::check(e.kind() == hg::ErrorKind::InvalidInput, "a ledger error not InvalidInput",
                      e.what());
    }
  }
  const hg::obs::ReportHtml page = hg::obs::render_report_html(r);
  hg::fuzz::check(!page.html.empty(), "an empty report page");
}

// --resume auto up to the first step. Returns the step resumed from, or -1 for a new run.
int64_t resume(const std::string& run) {
  hg::train::CheckpointConfig checkpoints;
  checkpoints.every_seconds = 0;
  checkpoints.keep_last = 1000;  // no rotation: what leaves the folder is what a resume moves
  hg::train::SessionOptions options{.run_dir = run, .progress = false, .resume = "auto"};
  options.metrics.tensorboard = false;
  hg::train::RunSession session(config(), "fuzz", kTrajectory, checkpoints, options);
  Learner& l = learner();
  const auto ckpt = session.find_resume_point([&](const hg::train::LoadedCheckpoint& c) {
    hg::train::check_resumable(c, kTrajectory, hg::ops::EngineSettings{}, *l.model, *l.sgd,
                               kStepsPerEpoch, kBatchSize);
  });
  if (!ckpt) {
    session.start_new();
    return -1;
  }
  session.adopt(*ckpt);
  return ckpt->state.step;
}

bool documented_change(const std::string& path, bool new_run) {
  if (written_by_resume(path)) return true;
  if (path.starts_with("checkpoints/") && path.find(".tmp.") != std::string::npos &&
      path.find('/', 12) == std::string::npos)
    return true;
  for (const char* own : {"metrics.jsonl.tmp.", "metrics.csv.tmp.", "steps.jsonl.tmp.",
                          "steps.csv.tmp.", "config.toml.tmp.", "final.safetensors.tmp."})
    if (path.starts_with(own)) return true;
  return new_run && path.starts_with("tensorboard/events.out.tfevents.");
}

void check_resume_changes(const Snapshot& before, const Snapshot& after, int64_t resumed_step) {
  for (const auto& [path, entry] : before) {
    if (documented_change(path, resumed_step < 0)) continue;
    const auto it = after.find(path);
    if (it != after.end()) {
      hg::fuzz::check(it->second == entry, "a resume changed an entry it does not own", path);
      continue;
    }
    // Gone: only a checkpoint newer than the one resumed from (a regular file, or a link to
    // one: the rotation lists both), moved to discarded/ as it was.
    const std::string name = path.substr(path.rfind('/') + 1);
    const bool checkpoint = path == "checkpoints/" + name && name.starts_with("step-");
    hg::fuzz::check(checkpoint, "a resume removed an entry", path);
    // discarded/ as a link to a folder elsewhere: the move follows it, out of sight here.
    if (const auto d = before.find("checkpoints/discarded");
        d != before.end() && d->second.type == fs::file_type::symlink)
      continue;
    // Under its own name, or step-<step>.<k>.safetensors where that was taken.
    bool found = false;
    const std::string stem = name.substr(0, name.size() - std::string_view(".safetensors").size());
    for (int k = 0; k < 32 && !found; ++k) {
      const auto moved = after.find("checkpoints/discarded/" +
                                    (k == 0 ? name : fmt::format("{}.{}.safetensors", stem, k)));
      found = moved != after.end() && moved->second == entry && !before.contains(moved->first);
    }
    hg::fuzz::check(found, "a checkpoint left the rotation but is not in discarded/", path);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet =
      (hg::set_log_level(std::getenv("HG_FUZZ_PRINT") ? "debug" : "off"), true);
  (void)quiet;
  const fs::path base = hg::fuzz::scratch_dir() / "runs";
  const fs::path run = base / "run", outside = base / "outside";
  std::error_code ec;
  fs::remove_all(base, ec);
  Script in{data, size};
  build(in, run, outside);
  const Snapshot before = snapshot(run);
  hg::fuzz::expect_load_or_clear_refusal([&] { report(run.string()); }, run.string());
  hg::fuzz::check(snapshot(run) == before, "the report changed the run directory");
  int64_t resumed_step = -1;
  try {
    resumed_step = resume(run.string());
  } catch (const hg::Error& e) {
    const std::string_view message = e.what();
    hg::fuzz::check(e.kind() == hg::ErrorKind::InvalidInput || e.kind() == hg::ErrorKind::Runtime,
                    "a resume failed with an error other than InvalidInput or Runtime", message);
    hg::fuzz::check(message.size() <= hg::fuzz::kMaxMessageBytes, "refusal message too long",
                    message.substr(0, 400));
    hg::fuzz::check(message.find(run.string()) != std::string_view::npos,
                    "a resume error does not name the run directory", message);
  }
  check_resume_changes(before, snapshot(run), resumed_step);
  fs::remove_all(base, ec);
  return 0;
}
