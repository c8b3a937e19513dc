// The hourglass command line as people expect it: results on stdout and log lines on stderr
// (and in <run-dir>/train.log), --version, --color and NO_COLOR, global flags before or after
// the subcommand, --json on every command that prints a result, an unknown config key refused
// with a suggestion, --print-config, and a diverged loss ending the run within a few steps with
// its own exit code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "data/image_fixtures.h"
#include "hourglass/tensor/safetensors.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

using test::run_hourglass;
using test::run_hourglass_on_terminal;
using test::run_hourglass_split;

constexpr int kExitDiverged = 3;  // tools/hourglass/commands.h
const std::string kEscape = "\x1b[";

std::string temp_dir(const std::string& name) {
  return test::fresh_temp_dir("hourglass_command_line_" + name);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A tiny MLP on synthetic images: one epoch of 4 steps, a second or so. `extra` is appended
// (more keys, or a table).
std::string write_config(const std::string& dir, const std::string& extra = "") {
  const std::string path = dir + "/tiny.toml";
  std::ofstream(path) << R"(name = "tiny"
seed = 3
device = "cpu"
threads = 1
[model]
name = "mlp"
hidden = [16]
[data]
dataset = "synthetic"
synthetic = { train_size = 64, test_size = 32, height = 8, width = 8, channels = 1, classes = 4 }
workers = 0
[optim]
name = "sgd"
lr = 0.05
[train]
epochs = 1
batch_size = 16
)" << extra;
  return path;
}

TEST(CommandLine, ResultsGoToStdoutAndLogLinesToStderr) {
  const std::string dir = temp_dir("streams");
  const auto r = run_hourglass_split("train " + write_config(dir) + " --no-progress --run-dir " +
                                     dir + "/run");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // stdout: the result line alone.
  EXPECT_EQ(r.out.rfind("test accuracy ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  // stderr: the log lines and the epoch's line.
  EXPECT_NE(r.err.find("info run tiny: mlp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("epoch 1/1 loss"), std::string::npos) << r.err;
}

TEST(CommandLine, WarningsGoToStderr) {
  // Resuming with another thread count warns (run_session.cpp); `2>/dev/null` hides it.
  const std::string dir = temp_dir("warning");
  const std::string train =
      "train " + write_config(dir) + " --no-progress --run-dir " + dir + "/run";
  ASSERT_EQ(run_hourglass_split(train + " --stop-after 2").code, 75);
  const auto r = run_hourglass_split(train + " --resume auto --set threads=2");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("warning checkpoint "), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("warning checkpoint "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.rfind("test accuracy ", 0), 0u) << r.out;
  // An error is one line on stderr, nothing on stdout.
  const auto bad = run_hourglass_split("train " + dir + "/missing.toml");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.out, "");
  EXPECT_NE(bad.err.find("hourglass: error: "), std::string::npos) << bad.err;
}

// CLI11's own errors read like every other error: one line "hourglass: error: ...".
TEST(CommandLine, UsageErrorsHaveTheErrorPrefix) {
  for (const std::string& args :
       {std::string(), std::string("no-such-command"), std::string("doctor --no-such-flag")}) {
    const auto r = run_hourglass_split(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(r.err.rfind("hourglass: error: ", 0), 0u) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
  }
  const auto none = run_hourglass_split("");
  EXPECT_NE(none.err.find("A subcommand is required"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("hourglass --help"), std::string::npos) << none.err;
}

TEST(CommandLine, VersionPrintsTheVersionAndExitsZero) {
  const auto r = run_hourglass_split("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(r.out, std::regex("hourglass [0-9]+\\.[0-9]+\\.[0-9]+\\S*\n")))
      << r.out;
}

TEST(CommandLine, ColorAlwaysColorsLogLinesWhereverStderrGoes) {
  const std::string dir = temp_dir("color_always");
  const std::string train =
      "train " + write_config(dir) + " --no-progress --run-dir " + dir + "/run";
  const auto colored = run_hourglass_split(train + "/a --color always", "NO_COLOR=1");
  ASSERT_EQ(colored.code, 0) << colored.err;
  EXPECT_NE(colored.err.find(kEscape), std::string::npos) << colored.err;
  EXPECT_EQ(colored.out.find(kEscape), std::string::npos) << colored.out;
  // auto: stderr is a file here, so no colors.
  const auto plain = run_hourglass_split(train + "/b", "env -u NO_COLOR");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.err.find(kEscape), std::string::npos) << plain.err;
}

TEST(CommandLine, OnATerminalColorsUnlessNoColorOrColorNever) {
  const std::string dir = temp_dir("color_terminal");
  const std::string train =
      "train " + write_config(dir) + " --no-progress --run-dir " + dir + "/run";
  const auto colored = run_hourglass_on_terminal(train + "/a", "env -u NO_COLOR");
  ASSERT_EQ(colored.code, 0) << colored.output;
  EXPECT_NE(colored.output.find(kEscape), std::string::npos) << colored.output;
  const auto no_color = run_hourglass_on_terminal(train + "/b", "NO_COLOR=1");
  ASSERT_EQ(no_color.code, 0) << no_color.output;
  EXPECT_EQ(no_color.output.find(kEscape), std::string::npos) << no_color.output;
  // An empty NO_COLOR does not count (no-color.org).
  const auto empty = run_hourglass_on_terminal(train + "/c", "NO_COLOR=");
  ASSERT_EQ(empty.code, 0) << empty.output;
  EXPECT_NE(empty.output.find(kEscape), std::string::npos) << empty.output;
  // --color never, before the subcommand this time.
  const auto never = run_hourglass_on_terminal("--color never " + train + "/d", "env -u NO_COLOR");
  ASSERT_EQ(never.code, 0) << never.output;
  EXPECT_EQ(never.output.find(kEscape), std::string::npos) << never.output;
}

TEST(CommandLine, GlobalFlagsComeBeforeOrAfterTheSubcommand) {
  const std::string dir = temp_dir("global_flags");
  const std::string config = write_config(dir);
  for (const std::string& args :
       {"--log-level warn train " + config + " --no-progress --run-dir " + dir + "/before",
        "train " + config + " --no-progress --run-dir " + dir + "/after --log-level warn",
        "train --log-level=warn " + config + " --no-progress --run-dir " + dir + "/middle"}) {
    const auto r = run_hourglass_split(args);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find(" info "), std::string::npos) << args << "\n" << r.err;
    EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << args << "\n" << r.out;
  }
  const auto debug = run_hourglass_split("train " + config + " --no-progress --run-dir " + dir +
                                         "/debug --log-level debug --color never");
  ASSERT_EQ(debug.code, 0) << debug.err;
  EXPECT_NE(debug.err.find(" info run tiny"), std::string::npos) << debug.err;
  // A bad value is still refused after the subcommand.
  const auto bad = run_hourglass_split("train " + config + " --color sometimes");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--color"), std::string::npos) << bad.err;
}

TEST(CommandLine, UnknownConfigKeyIsAnErrorWithASuggestion) {
  const std::string dir = temp_dir("unknown_key");
  const std::string config = write_config(dir, "epoch = 3\n");  // under [train]
  const auto r = run_hourglass_split("train " + config + " --run-dir " + dir + "/run");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("hourglass: error: unknown config key 'train.epoch' in " + config + ":"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("did you mean 'train.epochs'?"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/run"));  // refused before the run directory is made
  // From --set, and with plan too.
  const auto set = run_hourglass_split("plan " + write_config(dir) +
                                       " --images-per-s 1000 --set optim.lr_decay=0.1");
  EXPECT_EQ(set.code, 2) << set.err;
  EXPECT_NE(set.err.find("'optim.lr_decay' from --set optim.lr_decay=0.1"), std::string::npos)
      << set.err;
  // The same name in another table is suggested too.
  const auto moved = run_hourglass_split("train " + write_config(dir) +
                                         " --print-config --set train.momentum=0.9");
  EXPECT_EQ(moved.code, 2) << moved.err;
  EXPECT_NE(moved.err.find("did you mean 'optim.momentum'?"), std::string::npos) << moved.err;
}

TEST(CommandLine, EveryShippedConfigHasOnlyKnownKeys) {
  for (const auto& entry : fs::directory_iterator(HG_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".toml" || entry.path().filename() == "prices.example.toml")
      continue;
    const auto r = run_hourglass_split("train " + entry.path().string() + " --print-config");
    EXPECT_EQ(r.code, 0) << entry.path() << "\n" << r.err;
  }
}

TEST(CommandLine, PrintConfigShowsTheResolvedConfigWithoutTraining) {
  const std::string dir = temp_dir("print_config");
  const auto r = run_hourglass_split("train " + write_config(dir) + " --run-dir " + dir +
                                     "/run --print-config --set train.epochs=7");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("epochs = 7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--set train.epochs=7"), std::string::npos) << r.out;
  // Defaults filled in: the momentum is not in the file.
  EXPECT_NE(r.out.find("# optim.momentum = "), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir + "/run"));
  EXPECT_EQ(r.err, "");
  const auto json = run_hourglass_split("train " + write_config(dir) + " --print-config --json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_NE(j.at("config").get<std::string>().find("batch_size = 16"), std::string::npos);
  EXPECT_NE(j.at("resolved").get<std::string>().find("train.epochs = 1"), std::string::npos);
}

TEST(CommandLine, JsonOutputOfEveryCommandParses) {
  const std::string dir = temp_dir("json");
  const std::string config = write_config(dir);
  const std::string run_dir = dir + "/run";
  const auto train = run_hourglass_split("train " + config + " --run-dir " + run_dir + " --json");
  ASSERT_EQ(train.code, 0) << train.err;
  const auto t = nlohmann::json::parse(train.out);
  EXPECT_EQ(t.at("run_dir"), run_dir);
  EXPECT_EQ(t.at("stopped"), false);
  EXPECT_EQ(t.at("step"), 4);
  EXPECT_EQ(t.at("last_epoch").at("epoch"), 1);
  EXPECT_GE(t.at("last_epoch").at("test_acc").get<double>(), 0.0);

  const auto eval = run_hourglass_split("eval " + run_dir + "/final.safetensors --json");
  ASSERT_EQ(eval.code, 0) << eval.err;
  const auto e = nlohmann::json::parse(eval.out);
  EXPECT_EQ(e.at("images"), 32);
  EXPECT_DOUBLE_EQ(e.at("accuracy").get<double>(), t.at("last_epoch").at("test_acc").get<double>());
  // "val" is the held-out validation split: refused for a run that held none out, and for one
  // that did, the split its val_acc was measured on.
  const auto no_val = run_hourglass_split("eval " + run_dir + "/final.safetensors --split val");
  EXPECT_EQ(no_val.code, 2) << no_val.err;
  EXPECT_NE(no_val.err.find("data.val_fraction"), std::string::npos) << no_val.err;
  const auto with_val = run_hourglass_split("train " + config + " --run-dir " + dir +
                                            "/val --set data.val_fraction=0.25 --json");
  ASSERT_EQ(with_val.code, 0) << with_val.err;
  const auto v = nlohmann::json::parse(with_val.out);
  const auto val_eval =
      run_hourglass_split("eval " + dir + "/val/final.safetensors --split val --json");
  ASSERT_EQ(val_eval.code, 0) << val_eval.err;
  const auto ve = nlohmann::json::parse(val_eval.out);
  EXPECT_EQ(ve.at("split"), "val");
  EXPECT_DOUBLE_EQ(ve.at("accuracy").get<double>(), v.at("last_epoch").at("val_acc").get<double>());

  const auto plan = run_hourglass_split("plan " + config + " --images-per-s 1000 --json");
  ASSERT_EQ(plan.code, 0) << plan.err;
  const auto p = nlohmann::json::parse(plan.out);
  EXPECT_EQ(p.at("steps_per_epoch"), 4);
  EXPECT_EQ(p.at("platforms").size(), 1u);

  // Stopped: the same object with the reason, exit 75.
  const auto stopped = run_hourglass_split("train " + config + " --run-dir " + dir +
                                           "/stopped --stop-after 2 --json");
  EXPECT_EQ(stopped.code, 75) << stopped.err;
  const auto s = nlohmann::json::parse(stopped.out);
  EXPECT_EQ(s.at("stopped"), true);
  EXPECT_EQ(s.at("step"), 2);
  EXPECT_NE(s.at("checkpoint").get<std::string>(), "");

  // A folder of images packed, and the pack checked.
  for (int i = 0; i < 4; ++i) {
    const std::string class_dir = fmt::format("{}/images/class_{}", dir, i % 2);
    fs::create_directories(class_dir);
    data::test::write_file(fmt::format("{}/{}.png", class_dir, i), data::test::png_of(6, 5, i));
  }
  const auto pack = run_hourglass_split("pack " + dir + "/images " + dir + "/pack --json");
  ASSERT_EQ(pack.code, 0) << pack.err;
  EXPECT_EQ(nlohmann::json::parse(pack.out).at("images"), 4);
  const auto check = run_hourglass_split("pack --check " + dir + "/pack --json");
  ASSERT_EQ(check.code, 0) << check.err;
  EXPECT_EQ(nlohmann::json::parse(check.out).at("classes"), 2);

  // doctor fails on a machine without a GPU but still prints its object.
  const auto doctor = run_hourglass_split("doctor --json");
  const auto d = nlohmann::json::parse(doctor.out);
  EXPECT_EQ(doctor.code, d.at("failed").get<int>() == 0 ? 0 : 1);
  EXPECT_FALSE(d.at("checks").empty());

  const auto info = run_hourglass_split("info --json");
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_NO_THROW(nlohmann::json::parse(info.out)) << info.out;
}

TEST(CommandLine, TrainWritesItsLogToTheRunDirectory) {
  const std::string dir = temp_dir("train_log");
  const std::string config = write_config(dir);
  const auto r = run_hourglass_split("train " + config + " --no-progress --run-dir " + dir +
                                     "/run --set train.epochs=2");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = read_file(dir + "/run/train.log");
  EXPECT_NE(log.find("info run tiny: mlp"), std::string::npos) << log;
  EXPECT_NE(log.find("epoch 1/2 loss"), std::string::npos) << log;
  EXPECT_NE(log.find("epoch 2/2 loss"), std::string::npos) << log;
  EXPECT_EQ(log.find(kEscape), std::string::npos) << log;
  // A resumed (here: finished) run appends.
  const auto again =
      run_hourglass_split("train " + config + " --no-progress --run-dir " + dir +
                          "/run --set train.epochs=2 --resume auto --log-level warn");
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(read_file(dir + "/run/train.log").rfind(log, 0), 0u);
}

// A learning rate of 1e12 makes the weights huge after the first step: the loss of the next
// steps is not finite.
TEST(CommandLine, DivergedLossExitsWithItsOwnCodeWithinAFewSteps) {
  const std::string dir = temp_dir("diverged");
  const std::string config = write_config(dir);
  // 32 steps in the epoch; the loss is checked every 8 steps.
  const std::string args = "train " + config +
                           " --no-progress --set optim.lr=1e12 --set data.synthetic.train_size=512"
                           " --run-dir " +
                           dir + "/run";
  const auto r = run_hourglass_split(args);
  EXPECT_EQ(r.code, kExitDiverged) << r.err;
  EXPECT_EQ(r.out, "");
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.err, m, std::regex("training diverged in epoch 1 by step (\\d+)")))
      << r.err;
  EXPECT_LE(std::stoi(m[1]), 8) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/run/final.safetensors"));
  EXPECT_EQ(read_file(dir + "/run/metrics.jsonl"), "");

  // With a checkpoint after every step: the newest checkpoint is one from before the
  // divergence, named in the message, its weights finite (not the diverged ones), and it loads.
  const auto c = run_hourglass_split(args + "2 --checkpoint-every-steps 1");
  EXPECT_EQ(c.code, kExitDiverged) << c.err;
  ASSERT_TRUE(std::regex_search(c.err, m, std::regex("by step (\\d+)"))) << c.err;
  const int diverged_step = std::stoi(m[1]);
  std::vector<std::string> checkpoints;
  for (const auto& e : fs::directory_iterator(dir + "/run2/checkpoints"))
    if (e.path().extension() == ".safetensors") checkpoints.push_back(e.path().filename());
  ASSERT_FALSE(checkpoints.empty()) << c.err;
  std::sort(checkpoints.begin(), checkpoints.end());
  const std::string newest = checkpoints.back();
  EXPECT_NE(c.err.find(newest + " is kept"), std::string::npos) << c.err;
  EXPECT_LT(std::stoi(newest.substr(5, 9)), diverged_step) << newest;  // step-NNNNNNNNN
  const SafetensorsFile kept = load_safetensors(dir + "/run2/checkpoints/" + newest);
  for (const auto& t : kept.tensors) {
    if (t.tensor.dtype() != DType::F32) continue;
    for (float v : t.tensor.to_vector<float>()) ASSERT_TRUE(std::isfinite(v)) << t.name;
  }
  const auto eval = run_hourglass_split("eval " + dir + "/run2/checkpoints/" + newest + " --json");
  EXPECT_EQ(eval.code, 0) << eval.err;

  // A rate so large that the first update makes the weights infinite, while the loss that
  // step computed (before the update) was finite: no checkpoint of them is written.
  const auto w =
      run_hourglass_split("train " + config + " --no-progress --set optim.lr=1e300 --run-dir " +
                          dir + "/run3 --checkpoint-every-steps 1");
  EXPECT_EQ(w.code, kExitDiverged) << w.err;
  EXPECT_NE(w.err.find("by step 1: the weights' sum is "), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("(none was written)"), std::string::npos) << w.err;
  EXPECT_TRUE(fs::is_empty(dir + "/run3/checkpoints")) << w.err;
}

}  // namespace
}  // namespace hg
