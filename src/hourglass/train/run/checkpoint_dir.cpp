#include "hourglass/train/run/checkpoint_dir.h"

#include "hourglass/base/file_check.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"

namespace hg::train {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kStepPrefix = "step-";
constexpr std::string_view kStepSuffix = ".safetensors";

// The step of "step-<digits>.safetensors", or -1 for any other name.
int64_t parse_step(std::string_view name) {
  if (name.size() <= kStepPrefix.size() + kStepSuffix.size() || !name.starts_with(kStepPrefix) ||
      !name.ends_with(kStepSuffix))
    return -1;
  const std::string_view digits =
      name.substr(kStepPrefix.size(), name.size() - kStepPrefix.size() - kStepSuffix.size());
  int64_t step = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  return ec == std::errc() && end == digits.data() + digits.size() ? step : -1;
}

}  // namespace

CheckpointDir::CheckpointDir(const std::string& run_dir, int64_t keep_last)
    : run_dir_(run_dir), dir_(run_dir + "/checkpoints"), keep_last_(keep_last) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw_runtime(fmt::format("cannot create checkpoint folder {}: {}", dir_, ec.message()),
                  "check that the run directory is writable");
  const std::string lock_path = run_dir_ + "/.lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (lock_fd_ < 0)
    throw_runtime(fmt::format("cannot open lock file {}: {}", lock_path, std::strerror(errno)));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string holder;
    std::ifstream(lock_path) >> holder;
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw_invalid(fmt::format("run directory {} is in use by another hourglass process{}", run_dir_,
                              holder.empty() ? "" : " (pid " + holder + ")"),
                  "wait for it to finish or stop it, or pass a different --run-dir");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) == 0 && ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid is only for the message above; a failure to record it changes nothing.
  }
  // Temporary files of writes a crash or kill interrupted (nobody else writes them: we hold
  // the lock): everything in checkpoints/, and the trainer's own files in the run directory.
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
  for (const auto& e : fs::directory_iterator(run_dir_, ec)) {
    const std::string name = e.path().filename().string();
    for (const char* own : {"metrics.jsonl.tmp.", "metrics.csv.tmp.", "steps.jsonl.tmp.",
                            "steps.csv.tmp.", "config.toml.tmp.", "final.safetensors.tmp."})
      if (name.starts_with(own)) fs::remove(e.path(), ec);
  }
}

CheckpointDir::~CheckpointDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::string CheckpointDir::file_name(int64_t step) {
  return fmt::format("{}{:09d}{}", kStepPrefix, step, kStepSuffix);
}

std::vector<CheckpointDir::Entry> CheckpointDir::list() const { return list_folder(dir_); }

std::vector<CheckpointDir::Entry> CheckpointDir::list_folder(const std::string& folder) {
  std::vector<Entry> out;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return out;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    const int64_t step = parse_step(name);
    if (step >= 0 && e.is_regular_file(ec)) out.push_back({step, name});
  }
  if (ec) throw_runtime(fmt::format("cannot list checkpoint folder {}: {}", folder, ec.message()));
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  return out;
}

std::string CheckpointDir::read_marker(const std::string& marker) const {
  const std::string kind = file_kind(path(marker));
  if (!kind.empty() && kind != "a regular file")  // a FIFO would block the resume
    throw_invalid(fmt::format("{} is {}, not the marker file hourglass writes", path(marker), kind),
                  "remove it; the next checkpoint writes it again");
  std::ifstream in(path(marker));
  std::string name;
  if (in) std::getline(in, name);
  return name;
}

void CheckpointDir::write_marker(const std::string& marker, const std::string& name) {
  write_file_atomic(path(marker), name + "\n");
}

void CheckpointDir::commit(const std::string& name, const std::string& best_name) {
  write_marker("last", name);
  if (!best_name.empty() && read_marker("best") != best_name) write_marker("best", best_name);
  const std::vector<Entry> all = list();
  const int64_t excess = int64_t(all.size()) - keep_last_;
  for (int64_t i = 0; i < excess; ++i) {
    const Entry& e = all[size_t(i)];
    if (e.name == best_name || e.name == name) continue;
    std::error_code ec;
    fs::remove(path(e.name), ec);
    if (ec) HG_LOG_WARN("cannot delete old checkpoint {}: {}", path(e.name), ec.message());
  }
}

std::vector<std::string> CheckpointDir::discard_after(int64_t step) {
  std::vector<std::string> moved;
  const std::string target = dir_ + "/discarded";
  for (const Entry& e : list()) {
    if (e.step <= step) continue;
    std::error_code ec;
    fs::create_directories(target, ec);
    // A checkpoint of this step discarded by an earlier resume keeps its place: this one takes
    // the first free name step-<step>.<k>.safetensors (rename() would replace the other).
    std::string moved_name = e.name;
    // (A name that cannot be looked up at all, ec set, is left to rename() to report.)
    for (int k = 1;
         fs::symlink_status(target + "/" + moved_name, ec).type() != fs::file_type::not_found &&
         !ec;
         ++k)
      moved_name = fmt::format("{}{:09d}.{}{}", kStepPrefix, e.step, k, kStepSuffix);
    fs::rename(path(e.name), target + "/" + moved_name, ec);
    if (ec)
      throw_runtime(fmt::format("cannot move {} out of the way to {}: {}", path(e.name), target,
                                ec.message()),
                    "delete it by hand, then resume again");
    moved.push_back(moved_name);
  }
  return moved;
}

}  // namespace hg::train
