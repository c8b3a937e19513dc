// `hourglass train` of a reinforcement-learning config (an [rl] table): the run directory's
// files, kill -9 at points of the run's own progress with --resume auto after each ending
// bit-identical to an uninterrupted run (final weights and every metrics line but the timings),
// --stop-after then --resume (PPO and DQN), --print-config, and bad keys refused naming the key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "support/run_files.h"
#include "support/spawn.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::read_file;

const std::string kBinary = HG_BINARY_DIR "/hourglass";

// CartPole PPO, 60 iterations of 4 copies x 32 steps, 2 epochs of 4 minibatches (8 optimizer
// steps an iteration), a checkpoint after every iteration.
std::string write_config(const std::string& dir, const std::string& extra = "") {
  const std::string path = dir + "/rl.toml";
  std::ofstream(path) << R"(
name = "rl-resume"
seed = 3
threads = 1
[rl]
algorithm = "ppo"
env = "CartPole-v1"
total_steps = 7680
num_envs = 4
num_steps = 32
num_minibatches = 4
update_epochs = 2
[checkpoint]
every_steps = 8
keep_last = 2
)" << extra;
  return path;
}

struct Result {
  int code = -1;
  std::string log;
};

Result run(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kBinary, "train"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = dir + "/log.txt";
  const pid_t pid = test::spawn_logged(argv, log, {});
  const std::optional<int> status = test::wait_status(pid, 300);
  if (!status) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ADD_FAILURE() << "hourglass did not finish in 5 minutes";
    return {};
  }
  return {test::exit_code(*status), read_file(log)};
}

// metrics.jsonl's lines without the fields that time the run.
std::vector<std::string> metrics_without_timings(const std::string& run_dir) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(run_dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
    for (const char* key : {"steps_per_s", "iteration_seconds", "checkpoint_seconds"}) j.erase(key);
    lines.push_back(j.dump());
  }
  return lines;
}

// hourglass eval of a CartPole agent's weights (final or a checkpoint) for `episodes` greedy
// episodes: their count and returns within what CartPole-v1 allows.
void expect_cartpole_eval(const std::string& dir, const std::string& weights, int episodes) {
  std::vector<std::string> argv = {kBinary, "eval", weights, "--episodes", std::to_string(episodes),
                                   "--json"};
  const pid_t pid = test::spawn_logged(argv, dir + "/eval.txt", {});
  const std::optional<int> status = test::wait_status(pid, 120);
  ASSERT_TRUE(status.has_value());
  const std::string out = read_file(dir + "/eval.txt");
  ASSERT_EQ(test::exit_code(*status), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out.substr(out.rfind("{\"checkpoint\"")));
  EXPECT_EQ(j["episodes"], episodes) << out;
  EXPECT_EQ(j["env"], "CartPole-v1");
  EXPECT_GE(j["min"].get<double>(), 8.0) << out;  // an episode lasts at least 8 steps
  EXPECT_LE(j["max"].get<double>(), 500.0) << out;
}

// A run of `config` stopped after `stop_after` optimizer steps and resumed ends as one that
// never stopped: the same final tensors and metrics lines (but the timings).
void expect_stop_and_resume_identical(const std::string& dir, const std::string& config,
                                      const std::string& stop_after) {
  const Result ref = run(dir, {config, "--run-dir", dir + "/ref"});
  ASSERT_EQ(ref.code, 0) << ref.log;
  EXPECT_NE(ref.log.find("mean return"), std::string::npos) << ref.log;
  const Result stopped = run(dir, {config, "--run-dir", dir + "/run", "--stop-after", stop_after});
  ASSERT_EQ(stopped.code, 75) << stopped.log;
  const Result resumed = run(dir, {config, "--run-dir", dir + "/run", "--resume", "auto"});
  ASSERT_EQ(resumed.code, 0) << resumed.log;
  EXPECT_NE(resumed.log.find("resumed from"), std::string::npos) << resumed.log;
  test::expect_same_final_tensors(dir + "/ref", dir + "/run");
  EXPECT_EQ(metrics_without_timings(dir + "/ref"), metrics_without_timings(dir + "/run"));
}

TEST(CliRlTrain, KillNineAtPointsOfProgressThenResumeAutoIsBitIdentical) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_rl_kill");
  const std::string config = write_config(dir);
  const Result ref = run(dir, {config, "--run-dir", dir + "/ref", "--no-progress"});
  ASSERT_EQ(ref.code, 0) << ref.log;
  EXPECT_NE(ref.log.find("mean return"), std::string::npos) << ref.log;
  for (const char* file : {"config.toml", "metrics.jsonl", "final.safetensors", "train.log"})
    EXPECT_TRUE(fs::exists(dir + "/ref/" + file)) << file;
  EXPECT_EQ(metrics_without_timings(dir + "/ref").size(), 60u);
  // hourglass eval plays the agent of final.safetensors and of a checkpoint.
  for (const std::string& weights :
       {dir + "/ref/final.safetensors", dir + "/ref/checkpoints/step-000000480.safetensors"})
    expect_cartpole_eval(dir, weights, 12);

  // Each life is killed at a point of its own progress: once its next checkpoint (1 to 4
  // iterations on) is in place, or at once.
  const std::string run_dir = dir + "/run";
  const std::vector<std::string> argv = {kBinary, "train",    config, "--run-dir",
                                         run_dir, "--resume", "auto", "--no-progress"};
  std::mt19937 rng(7);
  int kills = 0, lives = 0;
  while (kills < 6 && lives < 50) {
    ++lives;
    const int64_t before = test::last_checkpoint_step(run_dir);
    const int64_t target = std::max<int64_t>(before, 0) + 8 * int64_t(rng() % 5);
    const pid_t pid = test::spawn_logged(argv, dir + "/lives.txt", {});
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    bool ended = false;
    while (test::last_checkpoint_step(run_dir) < target) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        ended = true;
        break;
      }
      ASSERT_LT(Clock::now(), deadline) << "no progress in 2 minutes";
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (ended) break;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) break;  // it finished first
    ++kills;
  }
  std::printf("%d kills over %d lives\n", kills, lives);
  EXPECT_GE(kills, 3) << "the run ended before enough kills landed";
  if (!fs::exists(run_dir + "/final.safetensors")) {
    const Result last = run(dir, {config, "--run-dir", run_dir, "--resume", "auto"});
    ASSERT_EQ(last.code, 0) << last.log;
  }
  test::expect_same_final_tensors(dir + "/ref", run_dir);
  EXPECT_EQ(metrics_without_timings(dir + "/ref"), metrics_without_timings(run_dir));
}

TEST(CliRlTrain, StopAfterExits75ThenResumeCompletesIdentically) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_rl_stop");
  const std::string config = write_config(dir);
  const Result ref = run(dir, {config, "--run-dir", dir + "/ref"});
  ASSERT_EQ(ref.code, 0) << ref.log;
  const Result stopped = run(dir, {config, "--run-dir", dir + "/run", "--stop-after", "100",
                                   "--set", "monitor.every_seconds=0.05"});
  EXPECT_EQ(stopped.code, 75) << stopped.log;
  // The device monitor: the host's readings in monitor.csv, its first sample taken at the start.
  const std::string monitor = read_file(dir + "/run/monitor.csv");
  EXPECT_EQ(monitor.rfind("unix_time,elapsed_s,", 0), 0u) << monitor;
  EXPECT_GE(std::count(monitor.begin(), monitor.end(), '\n'), 2) << monitor;
  EXPECT_NE(monitor.find("host_cpu_pct"), std::string::npos) << monitor;
  EXPECT_NE(stopped.log.find("at iteration 13"), std::string::npos) << stopped.log;
  EXPECT_NE(stopped.log.find("--resume auto"), std::string::npos) << stopped.log;
  EXPECT_FALSE(fs::exists(dir + "/run/final.safetensors"));
  const Result resumed =
      run(dir, {config, "--run-dir", dir + "/run", "--resume", "auto", "--json"});
  ASSERT_EQ(resumed.code, 0) << resumed.log;
  // The result is stdout's one line, the last of the log starting with '{'.
  const size_t at = resumed.log.rfind("\n{");
  ASSERT_NE(at, std::string::npos) << resumed.log;
  const std::string json_line = resumed.log.substr(at + 1);
  const nlohmann::json out = nlohmann::json::parse(json_line.substr(0, json_line.find('\n')));
  EXPECT_EQ(out["iterations"], 60);
  EXPECT_EQ(out["global_step"], 7680);
  EXPECT_EQ(out["step"], 480);
  EXPECT_EQ(out["last_iteration"]["epoch"], 60);
  test::expect_same_final_tensors(dir + "/ref", dir + "/run");
}

// A continuous-action run: the Gaussian policy, and the observation and reward normalisers'
// statistics (the agent's and the run's) carried through a checkpoint.
TEST(CliRlTrain, ContinuousRunWithNormalisersResumesIdentically) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_rl_pendulum");
  const std::string config = dir + "/pendulum.toml";
  std::ofstream(config) << R"(
name = "rl-pendulum"
seed = 4
threads = 1
[rl]
env = "Pendulum-v1"
total_steps = 1280
num_envs = 2
num_steps = 64
num_minibatches = 4
update_epochs = 2
[checkpoint]
every_steps = 8
)";
  expect_stop_and_resume_identical(dir, config, "24");
}

// DQN in the run directory: stopped part-way and resumed, the Q-network, the target network,
// the replay buffer, the optimizer and the environments come back, so the run ends
// bit-identical (final weights and every metrics line but the timings); hourglass eval plays the
// Q-network of final.safetensors and of a checkpoint; DQN's own keys are checked.
TEST(CliRlTrain, DqnStopsAndResumesIdentically) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_rl_dqn");
  const std::string config = dir + "/dqn.toml";
  std::ofstream(config) << R"(
name = "rl-dqn"
seed = 5
threads = 1
[rl]
algorithm = "dqn"
env = "CartPole-v1"
total_steps = 6000
buffer_size = 2000
batch_size = 32
learning_starts = 1000
train_frequency = 4
target_network_frequency = 100
hidden = [32, 32]
iteration_steps = 500
[checkpoint]
every_steps = 125
)";
  expect_stop_and_resume_identical(dir, config, "300");
  EXPECT_NE(read_file(dir + "/ref/train.log").find("12 iterations of 500 environment steps"),
            std::string::npos);
  const std::vector<std::string> lines = metrics_without_timings(dir + "/ref");
  ASSERT_EQ(lines.size(), 12u);
  const nlohmann::json last = nlohmann::json::parse(lines.back());
  EXPECT_EQ(last["global_step"], 6000);
  EXPECT_EQ(last["updates"], 125);
  EXPECT_GT(last["td_loss"].get<double>(), 0.0);
  for (const std::string& weights :
       {dir + "/ref/final.safetensors", fmt::format("{}/ref/checkpoints/step-{:09d}.safetensors",
                                                    dir, test::last_checkpoint_step(dir + "/ref"))})
    expect_cartpole_eval(dir, weights, 5);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--set=rl.env=\"Pendulum-v1\"", "'rl.env'"},  // continuous actions
      {"--set=rl.iteration_steps=0", "'rl.iteration_steps'"},
      {"--set=rl.tau=0", "'rl.tau'"},
      {"--set=rl.hidden=[32, 0]", "'rl.hidden'"},
      {"--set=rl.num_minibatches=4", "rl.num_minibatches"},  // a PPO key: unused
  };
  for (const auto& [flag, named] : cases) {
    const Result r = run(dir, {config, flag, "--run-dir", dir + "/bad"});
    EXPECT_EQ(r.code, 2) << flag << ": " << r.log;
    EXPECT_NE(r.log.find(named), std::string::npos) << flag << ": " << r.log;
  }
}

TEST(CliRlTrain, PrintConfigAndBadKeys) {
  const std::string dir = test::fresh_temp_dir("hourglass_cli_rl_keys");
  const Result shown = run(dir, {write_config(dir), "--print-config"});
  ASSERT_EQ(shown.code, 0) << shown.log;
  EXPECT_NE(shown.log.find("# rl.env = \"CartPole-v1\""), std::string::npos) << shown.log;
  EXPECT_NE(shown.log.find("# rl.learning_rate = 0.00025"), std::string::npos) << shown.log;
  EXPECT_FALSE(fs::exists(dir + "/runs"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--set=rl.env=\"CartPole-v0\"", "'rl.env'"},
      {"--set=rl.algorithm=\"a2c\"", "'rl.algorithm'"},
      {"--set=device=\"gpu:0\"", "'device'"},
      {"--set=rl.num_minibatches=3", "'rl.num_minibatches'"},
      {"--set=rl.learnig_rate=0.1", "rl.learning_rate"},  // unused key: did you mean
  };
  for (const auto& [flag, named] : cases) {
    const Result r = run(dir, {write_config(dir), flag, "--run-dir", dir + "/bad"});
    EXPECT_EQ(r.code, 2) << flag << ": " << r.log;
    EXPECT_NE(r.log.find(named), std::string::npos) << flag << ": " << r.log;
  }
  EXPECT_FALSE(fs::exists(dir + "/bad/checkpoints")) << "a refused config wrote checkpoints";
}

}  // namespace
}  // namespace hg
