// Interrupting and resuming the hourglass binary: kill -9 at random times (some during
// checkpoint writes) with --resume auto after each ends bit-identical to an uninterrupted run;
// SIGTERM and the STOP file checkpoint and exit 75; a second SIGINT aborts; a signal pending
// before main() or arriving while the config is read exits 75 with nothing written (other
// subcommands keep the default action); a shared ledger corrupted mid-run stops with a
// checkpoint and resumes once repaired; a SIGTERM after the last evaluation ends as its message
// says; truncated and corrupted checkpoints are skipped with a warning; a changed config is
// refused naming the difference; flags that cannot work are one-line errors.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "support/run_files.h"
#include "support/spawn.h"
#include "support/temp_dir.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "hourglass/base/atomic_file.h"
#include "hourglass/tensor/safetensors.h"

extern char** environ;

namespace hg {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kBinary = HG_BINARY_DIR "/hourglass";

std::string fresh_dir(const std::string& name) {
  return test::fresh_temp_dir("hourglass_cli_resume_" + name);
}

using test::read_file;

// An MLP with dropout (masks from the step) on augmented synthetic images, SGD with Nesterov
// momentum and a warm-up + cosine schedule; a checkpoint after every step (15 MB each, so
// writes take a good part of the run and kills land in them). 3 epochs of 24 steps.
std::string write_config(const std::string& dir, const std::string& extra = "") {
  const std::string path = dir + "/run.toml";
  std::ofstream(path) << R"(
name = "resume"
seed = 5
threads = 2
[model]
name = "mlp"
hidden = [1024, 1024]
dropout = 0.2
[data]
dataset = "synthetic"
synthetic = { train_size = 768, test_size = 128, height = 16, width = 16, channels = 3, classes = 10 }
augment = true
workers = 1
[optim]
name = "sgd"
lr = 0.05
momentum = 0.9
nesterov = true
weight_decay = 5e-4
[schedule]
name = "cosine"
warmup_epochs = 0.5
[train]
epochs = 3
batch_size = 32
label_smoothing = 0.1
[checkpoint]
every_steps = 1
keep_last = 3
)" << extra;
  return path;
}

// A running hourglass process; stdout and stderr go to `log`.
struct Process {
  pid_t pid = -1;
  std::string log;
};

// `blocked`: signals the child starts with blocked (as a supervisor may start it).
Process spawn(const std::vector<std::string>& args, const std::string& log,
              const std::vector<int>& blocked = {}) {
  std::vector<std::string> argv = {kBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  return Process{test::spawn_logged(argv, log, {.blocked_signals = blocked}), log};
}

// The wait status once the process ends within `seconds`, else nullopt (still running).
std::optional<int> wait_for(const Process& p, double seconds) {
  return test::wait_status(p.pid, seconds);
}

using test::exit_code;

// Runs to completion (at most 5 minutes); returns the exit code.
int run_to_end(const std::vector<std::string>& args, const std::string& log) {
  Process p = spawn(args, log);
  std::optional<int> status = wait_for(p, 300);
  if (!status) {
    ::kill(p.pid, SIGKILL);
    ::waitpid(p.pid, nullptr, 0);
    ADD_FAILURE() << "hourglass did not finish in 5 minutes: " << read_file(log);
    return -1;
  }
  return exit_code(*status);
}

bool wait_until(const std::function<bool()>& condition, double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::vector<std::string> train_args(const std::string& config, const std::string& run_dir,
                                    std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"train", config, "--run-dir", run_dir, "--no-progress"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

struct Reference {
  std::string run_dir;
  double first_step_seconds = 0;  // from launch until the first checkpoint is marked
  double step_seconds = 0;        // per step after that, checkpoint and evaluation included
};

// The uninterrupted run everything is compared with (72 steps).
Reference reference_run(const std::string& name) {
  const std::string dir = fresh_dir(name + "_ref");
  const std::string config = write_config(dir);
  Reference ref{dir + "/run"};
  const auto t0 = Clock::now();
  Process p = spawn(train_args(config, ref.run_dir), dir + "/log.txt");
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::optional<int> status;
  while (!(status = wait_for(p, 0)) && !fs::exists(ref.run_dir + "/checkpoints/last"))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ref.first_step_seconds = seconds();
  if (!status) status = wait_for(p, 300);
  EXPECT_TRUE(status && exit_code(*status) == 0) << read_file(dir + "/log.txt");
  ref.step_seconds = (seconds() - ref.first_step_seconds) / 71;
  return ref;
}

// final.safetensors (model and optimizer tensors) bit-identical, and the same metrics.jsonl
// apart from timings: one line per epoch.
void expect_same_result(const std::string& ref_dir, const std::string& dir) {
  test::expect_same_final_tensors(ref_dir, dir);
  auto lines = [](const std::string& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  const auto la = lines(ref_dir + "/metrics.jsonl"), lb = lines(dir + "/metrics.jsonl");
  ASSERT_EQ(la.size(), 3u);
  ASSERT_EQ(lb.size(), la.size()) << read_file(dir + "/metrics.jsonl");
  for (size_t i = 0; i < la.size(); ++i)
    for (const char* key : {"epoch", "train_loss", "train_acc", "test_loss", "test_acc", "lr"})
      EXPECT_EQ(la[i][key], lb[i][key]) << "epoch " << i + 1 << " " << key;
  EXPECT_TRUE(lb[0].contains("checkpoint_seconds"));
}

int count_temp_files(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
  return n;
}

int64_t last_step(const std::string& run_dir) { return test::last_checkpoint_step(run_dir); }

int count_occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Polls `reached` until it holds (true) or the process ends (false); never past 5 minutes.
bool wait_for_progress(const Process& p, const std::function<bool()>& reached, bool busy) {
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (Clock::now() < deadline) {
    if (reached()) return true;
    if (::waitpid(p.pid, nullptr, WNOHANG) == p.pid) return false;
    if (busy)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ADD_FAILURE() << "no progress in 5 minutes";
  return false;
}

TEST(CliResume, KillNineAtRandomPointsThenResumeAutoIsBitIdentical) {
  const std::string ref_dir = reference_run("kill").run_dir;
  const std::string dir = fresh_dir("kill");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  const std::string log_path = dir + "/log.txt";
  const auto args = train_args(config, run_dir, {"--resume", "auto"});
  // Each life is killed at a point of its own progress, never at a time guessed in advance
  // (so a slow or busy machine changes nothing): at once (before the checkpoint is read),
  // once training has started (the run's first log line), in the middle of the next
  // checkpoint write (its temporary file exists), or after 1-4 more checkpoints. That advances
  // the run by about 1.4 of its 72 steps per kill, so all 20 kills land before it ends, epoch
  // ends among them.
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> kind(0, 7);
  int kills = 0, kills_in_writes = 0, lives = 0;
  while (kills < 20) {
    ++lives;
    ASSERT_LT(lives, 200) << "the run never finished";
    const int k = kind(rng);
    const int64_t step_before = last_step(run_dir);
    const int starts_before = count_occurrences(read_file(log_path), "] info run resume:");
    Process p = spawn(args, log_path);
    bool reached = true;
    if (k == 1) {
      reached = wait_for_progress(
          p,
          [&] {
            return count_occurrences(read_file(log_path), "] info run resume:") > starts_before;
          },
          false);
    } else if (k == 2 || k == 3) {
      reached = wait_for_progress(
          p, [&] { return count_temp_files(run_dir + "/checkpoints") > 0; }, true);
    } else if (k >= 4) {
      const int64_t target = std::max<int64_t>(step_before, 0) + (k - 3);
      reached = wait_for_progress(
          p, [&] { return last_step(run_dir) >= target; }, false);
    }
    if (!reached) {  // it ended first: the run is complete (checked below)
      ::waitpid(p.pid, nullptr, 0);
      break;
    }
    ::kill(p.pid, SIGKILL);
    int status = 0;
    ::waitpid(p.pid, &status, 0);
    // A process that ended on its own between the check and the kill is not a kill.
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) break;
    ++kills;
    if (count_temp_files(run_dir + "/checkpoints") > 0) ++kills_in_writes;
  }
  // The last life runs to the end.
  if (!fs::exists(run_dir + "/final.safetensors"))
    ASSERT_EQ(run_to_end(args, log_path), 0) << read_file(log_path);
  ASSERT_TRUE(fs::exists(run_dir + "/final.safetensors")) << read_file(log_path);
  const std::string log = read_file(log_path);
  const auto resumed_at = log.rfind("resuming from");
  std::printf("%d kills (%d during a checkpoint write) over %d lives; the last resumed %s\n", kills,
              kills_in_writes, lives,
              log.substr(resumed_at, log.find('\n', resumed_at) - resumed_at).c_str());
  EXPECT_EQ(kills, 20);
  EXPECT_GE(kills_in_writes, 1);
  expect_same_result(ref_dir, run_dir);
  EXPECT_EQ(count_temp_files(run_dir + "/checkpoints"), 0);
}

TEST(CliResume, SigtermCheckpointsAndExits75ThenResumeCompletes) {
  const std::string ref = reference_run("sigterm").run_dir;
  const std::string dir = fresh_dir("sigterm");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  Process p = spawn(train_args(config, run_dir), dir + "/log.txt");
  ASSERT_TRUE(wait_until([&] { return fs::exists(run_dir + "/checkpoints/last"); }, 120));
  ::kill(p.pid, SIGTERM);
  std::optional<int> status = wait_for(p, 120);
  ASSERT_TRUE(status.has_value());
  const std::string log = read_file(dir + "/log.txt");
  EXPECT_EQ(exit_code(*status), 75) << log;
  EXPECT_NE(log.find("stopped (SIGTERM)"), std::string::npos) << log;
  EXPECT_NE(log.find("--resume auto"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(run_dir + "/final.safetensors"));
  EXPECT_EQ(run_to_end(train_args(config, run_dir, {"--resume", "auto"}), dir + "/log.txt"), 0)
      << read_file(dir + "/log.txt");
  expect_same_result(ref, run_dir);
}

TEST(CliResume, StopFileCheckpointsAndExits75AndIsConsumed) {
  const std::string ref = reference_run("stopfile").run_dir;
  const std::string dir = fresh_dir("stopfile");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  fs::create_directories(run_dir);
  std::ofstream(run_dir + "/STOP").close();
  EXPECT_EQ(run_to_end(train_args(config, run_dir), dir + "/log.txt"), 75)
      << read_file(dir + "/log.txt");
  EXPECT_NE(read_file(dir + "/log.txt").find("the STOP file"), std::string::npos);
  EXPECT_FALSE(fs::exists(run_dir + "/STOP"));
  EXPECT_TRUE(fs::exists(run_dir + "/checkpoints/step-000000001.safetensors"));
  EXPECT_EQ(run_to_end(train_args(config, run_dir, {"--resume", "auto"}), dir + "/log.txt"), 0)
      << read_file(dir + "/log.txt");
  expect_same_result(ref, run_dir);
}

TEST(CliResume, SecondSigintAbortsAtOnce) {
  const std::string dir = fresh_dir("sigint");
  // Slow steps (~0.3 s and more): the second SIGINT arrives while the first step still runs.
  const std::string config = dir + "/slow.toml";
  std::ofstream(config) << R"(
threads = 2
[model]
name = "mlp"
hidden = [2048, 2048]
[data]
dataset = "synthetic"
synthetic = { train_size = 2048, test_size = 64, height = 32, width = 32, channels = 3 }
workers = 0
[train]
batch_size = 256
)";
  Process p = spawn(train_args(config, dir + "/run"), dir + "/log.txt");
  ASSERT_TRUE(
      wait_until([&] { return read_file(p.log).find("info run ") != std::string::npos; }, 120))
      << read_file(p.log);
  ::kill(p.pid, SIGINT);
  ASSERT_TRUE(wait_until(
      [&] { return read_file(p.log).find("Ctrl-C again aborts") != std::string::npos; }, 60));
  ::kill(p.pid, SIGINT);
  std::optional<int> status = wait_for(p, 120);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGINT) << read_file(p.log);
}

TEST(CliResume, TruncatedAndCorruptedNewestCheckpointsAreSkippedWithAWarning) {
  const std::string ref = reference_run("damaged").run_dir;
  const std::string dir = fresh_dir("damaged");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  ASSERT_EQ(run_to_end(train_args(config, run_dir, {"--stop-after", "6"}), dir + "/log.txt"), 75);
  const std::string ck = run_dir + "/checkpoints/";
  // Newest: cut in half. Next: one byte of tensor data flipped (the checksum catches it).
  fs::resize_file(ck + "step-000000006.safetensors",
                  fs::file_size(ck + "step-000000006.safetensors") / 2);
  {
    std::fstream f(ck + "step-000000005.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1000, std::ios::end);
    const char c = char(f.get() ^ 0x5a);
    f.seekp(-1000, std::ios::end);
    f.put(c);
  }
  const std::string log = dir + "/resume.txt";
  EXPECT_EQ(run_to_end(train_args(config, run_dir, {"--resume", "auto"}), log), 0)
      << read_file(log);
  const std::string text = read_file(log);
  const auto warning = [&](const std::string& name, const std::string& reason) {
    const auto pos = text.find("skipping checkpoint " + ck + name);
    ASSERT_NE(pos, std::string::npos) << text;
    const std::string line = text.substr(pos, text.find('\n', pos) - pos);
    EXPECT_NE(line.find(reason), std::string::npos) << line;
  };
  warning("step-000000006.safetensors", "truncated");
  warning("step-000000005.safetensors", "checksum mismatch");
  EXPECT_NE(text.find("resuming from " + ck + "step-000000004.safetensors"), std::string::npos)
      << text;
  EXPECT_TRUE(fs::exists(ck + "discarded/step-000000006.safetensors"));
  expect_same_result(ref, run_dir);
}

TEST(CliResume, ChangedConfigIsRefusedNamingTheDifference) {
  const std::string dir = fresh_dir("changed");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  ASSERT_EQ(run_to_end(train_args(config, run_dir, {"--stop-after", "2"}), dir + "/log.txt"), 75);
  for (const std::string& resume :
       std::vector<std::string>{"auto", run_dir + "/checkpoints/step-000000002.safetensors"}) {
    const std::string log = dir + "/changed.txt";
    fs::remove(log);
    EXPECT_EQ(run_to_end(train_args(config, run_dir,
                                    {"--resume", resume, "--set", "model.name=small_cnn"}),
                         log),
              2);
    const std::string text = read_file(log);
    EXPECT_NE(text.find("hourglass: error: "), std::string::npos) << text;
    EXPECT_NE(text.find("model.name = \"small_cnn\" (checkpoint: \"mlp\")"), std::string::npos)
        << text;
    if (resume == "auto") {
      EXPECT_NE(text.find("skipping checkpoint " + run_dir + "/checkpoints/step-000000001"),
                std::string::npos)
          << text;
    }
  }
  // Settings outside the trajectory may change: checkpoint interval, loader threads.
  const std::string log = dir + "/same.txt";
  EXPECT_EQ(run_to_end(train_args(config, run_dir,
                                  {"--resume", "auto", "--checkpoint-every-steps", "0",
                                   "--checkpoint-every", "5m", "--set", "data.workers=0",
                                   "--stop-after", "1"}),
                       log),
            75)
      << read_file(log);
  EXPECT_NE(read_file(log).find("resuming from"), std::string::npos);
}

TEST(CliResume, ResumeFlagsThatCannotWorkAreOneLineErrors) {
  const std::string dir = fresh_dir("flags");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  const std::string log = dir + "/log.txt";
  auto last_line = [&] {
    std::string t = read_file(log);
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
  };
  EXPECT_EQ(run_to_end({"train", config, "--resume", "auto"}, log), 2);
  EXPECT_NE(last_line().find("--run-dir"), std::string::npos) << last_line();
  EXPECT_EQ(run_to_end(train_args(config, run_dir, {"--checkpoint-every", "ten minutes"}), log), 2);
  EXPECT_NE(last_line().find("--checkpoint-every"), std::string::npos) << last_line();
  ASSERT_EQ(run_to_end(train_args(config, run_dir, {"--stop-after", "1"}), log), 75);
  // Starting again over existing checkpoints without --resume.
  EXPECT_EQ(run_to_end(train_args(config, run_dir), log), 2);
  EXPECT_NE(last_line().find("--resume auto"), std::string::npos) << last_line();
  // Every checkpoint damaged: an error, not a silent new run.
  for (const auto& e : fs::directory_iterator(run_dir + "/checkpoints"))
    if (e.path().extension() == ".safetensors") fs::resize_file(e.path(), 100);
  EXPECT_EQ(run_to_end(train_args(config, run_dir, {"--resume", "auto"}), log), 2);
  EXPECT_NE(last_line().find("none of the"), std::string::npos) << last_line();
  EXPECT_NE(last_line().find("can continue this run"), std::string::npos) << last_line();
}

TEST(CliResume, ASignalBeforeMainIsHandledAndEndsWith75NothingWritten) {
  const std::string dir = fresh_dir("early");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  // The child starts with SIGTERM blocked and the signal is pending before its first
  // instruction: it is delivered when main() unblocks it, once handled, before anything else.
  Process p = spawn(train_args(config, run_dir), dir + "/log.txt", {SIGTERM});
  ASSERT_EQ(::kill(p.pid, SIGTERM), 0);
  std::optional<int> status = wait_for(p, 300);
  ASSERT_TRUE(status.has_value());
  const std::string log = read_file(p.log);
  EXPECT_TRUE(WIFEXITED(*status)) << "ended by the signal's default action: " << log;
  EXPECT_EQ(exit_code(*status), 75) << log;
  EXPECT_NE(log.find("before training started: nothing written, exit 75"), std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(run_dir)) << "a stop before the run started wrote " << run_dir;
  // Nothing to continue from: --resume auto starts the run.
  EXPECT_EQ(
      run_to_end(train_args(config, run_dir, {"--resume", "auto", "--stop-after", "1"}), p.log), 75)
      << read_file(p.log);
  EXPECT_NE(read_file(p.log).find("no checkpoint in"), std::string::npos);
}

TEST(CliResume, OtherSubcommandsKeepTheSignalsDefaultAction) {
  // Pending before main() as above: `info` has nothing to stop cleanly, so the signal ends it
  // as it would without handlers.
  const std::string dir = fresh_dir("info_signal");
  Process p = spawn({"info"}, dir + "/log.txt", {SIGTERM});
  ASSERT_EQ(::kill(p.pid, SIGTERM), 0);
  std::optional<int> status = wait_for(p, 300);
  ASSERT_TRUE(status.has_value()) << read_file(p.log);
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGTERM) << read_file(p.log);
}

TEST(CliResume, ASignalDuringSetupEndsAtOnceWith75NothingWritten) {
  const std::string dir = fresh_dir("setup");
  const std::string config = write_config(dir);
  const std::string hold = dir + "/hold";
  ASSERT_EQ(::mkfifo(hold.c_str(), 0600), 0) << std::strerror(errno);
  const std::string run_dir = dir + "/run";
  // The train command opens HOURGLASS_TEST_HOLD_IN_SETUP for reading before it loads its
  // config and reads it until the writer closes; opening the FIFO for writing succeeds once it
  // opened it, and it then waits in read() while this end stays open: past argument parsing
  // and before anything of the run is written. (Without a reader the non-blocking open fails
  // with ENXIO; a child that ends first fails the test.)
  ::setenv("HOURGLASS_TEST_HOLD_IN_SETUP", hold.c_str(), 1);
  Process p = spawn(train_args(config, run_dir), dir + "/log.txt");
  ::unsetenv("HOURGLASS_TEST_HOLD_IN_SETUP");
  int fd = -1;
  ASSERT_TRUE(wait_for_progress(
      p, [&] { return (fd = ::open(hold.c_str(), O_WRONLY | O_NONBLOCK)) >= 0; }, false))
      << "the child never reached its setup: " << read_file(p.log);
  ::kill(p.pid, SIGTERM);
  std::optional<int> status = wait_for(p, 300);
  ::close(fd);
  if (!status) {
    ::kill(p.pid, SIGKILL);
    ::waitpid(p.pid, nullptr, 0);
  }
  ASSERT_TRUE(status.has_value()) << "the signal did not end the process: " << read_file(p.log);
  const std::string log = read_file(p.log);
  EXPECT_EQ(exit_code(*status), 75) << log;
  EXPECT_NE(log.find("SIGTERM before the run directory was touched: nothing written, exit 75"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(run_dir));
}

TEST(CliResume, ALedgerCorruptedMidRunStopsWithACheckpointAndResumesOnceRepaired) {
  const std::string dir = fresh_dir("ledger");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  const std::string ledger = dir + "/shared/ledger.json";
  // The ledger is written at every step (budget.flush_every = 0), so the step after the damage
  // meets it.
  const auto args =
      train_args(config, run_dir, {"--ledger", ledger, "--set", "budget.flush_every=\"0s\""});
  Process p = spawn(args, dir + "/log.txt");
  ASSERT_TRUE(wait_for_progress(
      p, [&] { return last_step(run_dir) >= 2; }, false))
      << read_file(p.log);
  // Another process replaces the shared file with garbage, under the ledger's lock (so that
  // no write of the run in flight replaces the garbage in turn).
  const std::string garbage = "{\"format\": \"hourglass-budget-ledger\", \"sessi";
  {
    FileLock lock(ledger);
    std::ofstream(ledger + ".edit") << garbage;
    fs::rename(ledger + ".edit", ledger);
  }
  std::optional<int> status = wait_for(p, 300);
  ASSERT_TRUE(status.has_value());
  const std::string log = read_file(p.log);
  ASSERT_EQ(exit_code(*status), 75) << log;
  const auto stopped = log.find("stopped (budget ledger " + ledger + " is corrupted");
  ASSERT_NE(stopped, std::string::npos) << log;
  EXPECT_NE(log.find("--resume auto", stopped), std::string::npos) << log;
  EXPECT_NE(log.find("cp " + ledger + ".bak " + ledger), std::string::npos) << log;
  EXPECT_EQ(read_file(ledger), garbage) << "the damaged ledger was overwritten";
  EXPECT_FALSE(fs::exists(run_dir + "/final.safetensors"));
  const int64_t checkpointed = last_step(run_dir);
  EXPECT_GT(checkpointed, 2) << "no checkpoint at the stop";
  // Still damaged: resuming is a one-line error naming the file.
  const std::string refused = dir + "/refused.txt";
  EXPECT_EQ(
      run_to_end(train_args(config, run_dir, {"--resume", "auto", "--ledger", ledger}), refused),
      2);
  EXPECT_NE(read_file(refused).find(ledger), std::string::npos) << read_file(refused);
  // Repaired as the remedy says: the run continues from its checkpoint to the end.
  fs::copy_file(ledger + ".bak", ledger, fs::copy_options::overwrite_existing);
  const std::string resumed = dir + "/resumed.txt";
  EXPECT_EQ(
      run_to_end(train_args(config, run_dir, {"--resume", "auto", "--ledger", ledger}), resumed), 0)
      << read_file(resumed);
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(checkpointed));
  EXPECT_NE(
      read_file(resumed).find(std::string("resuming from ") + run_dir + "/checkpoints/" + name),
      std::string::npos)
      << read_file(resumed);
  EXPECT_TRUE(fs::exists(run_dir + "/final.safetensors"));
  const nlohmann::json l = nlohmann::json::parse(read_file(ledger));
  EXPECT_EQ(l["sessions"].size(), 2u) << l.dump(2);
}

TEST(CliResume, AStopAfterTheLastEvaluationEndsAsItsMessageSays) {
  const std::string dir = fresh_dir("lasteval");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  // One epoch of 24 steps; its epoch-end checkpoint (step 24) follows the last evaluation.
  // SIGTERM once that checkpoint is marked lands after the evaluation, before or after the run
  // turns to its final weights; either way the message and the exit code must agree.
  Process p = spawn(train_args(config, run_dir, {"--set", "train.epochs=1"}), dir + "/log.txt");
  ASSERT_TRUE(wait_for_progress(
      p, [&] { return last_step(run_dir) >= 24; }, true))
      << read_file(p.log);
  ::kill(p.pid, SIGTERM);
  std::optional<int> status = wait_for(p, 300);
  ASSERT_TRUE(status.has_value());
  const std::string log = read_file(p.log);
  const bool promised_75 = log.find("then exit 75") != std::string::npos;
  const bool promised_0 = log.find("it ends with exit 0") != std::string::npos;
  EXPECT_FALSE(promised_75 && promised_0) << log;
  if (exit_code(*status) == 75) {
    EXPECT_TRUE(promised_75) << log;
    EXPECT_NE(log.find("stopped (SIGTERM) at step 24"), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(run_dir + "/final.safetensors"));
    // The epoch-end checkpoint covers the whole run: resuming writes the final weights.
    const std::string resumed = dir + "/resumed.txt";
    EXPECT_EQ(
        run_to_end(train_args(config, run_dir, {"--resume", "auto", "--set", "train.epochs=1"}),
                   resumed),
        0)
        << read_file(resumed);
    EXPECT_NE(read_file(resumed).find("test accuracy"), std::string::npos) << read_file(resumed);
  } else {  // finished (no message at all: the signal came after the process ended)
    EXPECT_EQ(exit_code(*status), 0) << log;
    EXPECT_FALSE(promised_75) << "announced exit 75, exited 0: " << log;
  }
  EXPECT_TRUE(fs::exists(run_dir + "/final.safetensors"));
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  EXPECT_EQ(lines, 1);
}

}  // namespace
}  // namespace hg
