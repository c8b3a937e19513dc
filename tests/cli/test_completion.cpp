// `hourglass completion bash` and `zsh`: the scripts parse, and bash completes with its script
// as a user's shell would (COMP_WORDS / COMP_CWORD set, the completion function called):
// subcommands, each subcommand's own flags, the global flags' values; hidden subcommands are
// left out, and every subcommand `hourglass --help` lists is offered. zsh's script offers the
// same words.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include <unistd.h>

#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

// What `cmd` prints (stdout and stderr), without the trailing newlines.
std::string output_of(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  pclose(pipe);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Completion : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // CTest runs each test in a process of its own, several at once: a folder per process.
    script_ = test::fresh_temp_dir("completion_" + std::to_string(getpid())) + "/hourglass.bash";
    const test::RunResult r = test::run_hourglass("completion bash > " + script_);
    ASSERT_EQ(r.code, 0) << r.output;
  }

  // COMPREPLY, space-separated, for the command line `words` with the cursor on word `cword`.
  static std::string complete(const std::string& words, int cword) {
    return output_of("bash -c 'source " + script_ + "; COMP_WORDS=(" + words + "); COMP_CWORD=" +
                     std::to_string(cword) + "; _hourglass; echo \"${COMPREPLY[*]}\"'");
  }

  static std::string script_;
};
std::string Completion::script_;

TEST_F(Completion, ScriptParses) { EXPECT_EQ(std::system(("bash -n " + script_).c_str()), 0); }

TEST_F(Completion, CompletesSubcommandsAndTheirOwnFlags) {
  EXPECT_EQ(complete("hourglass tr", 1), "train");
  EXPECT_EQ(complete("hourglass train --run", 2), "--run-dir");
  EXPECT_EQ(complete("hourglass eval --spl", 2), "--split");
  // A flag of another subcommand is not offered.
  EXPECT_EQ(complete("hourglass eval --run", 2), "");
  // Global flags before the subcommand, with their values skipped.
  EXPECT_EQ(complete("hourglass --log-level debug bench --prec", 4), "--precision");
  EXPECT_EQ(complete("hourglass eval --color \"\"", 3), "auto always never");
  EXPECT_EQ(complete("hourglass train --log", 2), "--log-level");
  // Hidden subcommands (rank-info, for the tests) are not offered.
  EXPECT_EQ(complete("hourglass ra", 1), "");
}

// zsh: the script as zsh's completion system runs it, with compadd and _files standing in (they
// print what they are handed; zsh's compadd would filter by the typed prefix).
std::string zsh_candidates(const std::string& script, const std::string& words, int current) {
  return " " +
         output_of(
             "zsh -f -c 'compadd() { shift; print -r -- \"$*\"; }; "
             "_files() { print FILES; }; words=(" +
             words + "); CURRENT=" + std::to_string(current) + "; source " + script + "'") +
         " ";
}

TEST(CompletionZsh, ScriptParsesAndOffersEachSubcommandsFlags) {
  if (std::system("command -v zsh > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "no zsh (scripts/install-deps.sh --test installs it)";
  const std::string script =
      test::fresh_temp_dir("completion_zsh_" + std::to_string(getpid())) + "/_hourglass";
  const test::RunResult r = test::run_hourglass("completion zsh > " + script);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(std::system(("zsh -n " + script).c_str()), 0);
  const std::string commands = zsh_candidates(script, "hourglass tr", 2);
  EXPECT_NE(commands.find(" train "), std::string::npos) << commands;
  EXPECT_NE(commands.find(" completion "), std::string::npos) << commands;
  EXPECT_EQ(commands.find(" rank-info "), std::string::npos) << commands;
  const std::string train = zsh_candidates(script, "hourglass --log-level debug train --r", 5);
  EXPECT_NE(train.find(" --run-dir "), std::string::npos) << train;
  EXPECT_NE(train.find(" --color "), std::string::npos) << train;
  EXPECT_EQ(train.find(" --split "), std::string::npos) << train;
  EXPECT_EQ(zsh_candidates(script, "hourglass eval --color a", 4), " auto always never ");
  EXPECT_EQ(zsh_candidates(script, "hourglass eval run", 3), " FILES ");
}

TEST_F(Completion, OffersEverySubcommandTheHelpLists) {
  const test::RunResult help = test::run_hourglass("--help");
  const std::string all = " " + complete("hourglass \"\"", 1) + " ";
  const size_t heading = help.output.find("Subcommands:");
  ASSERT_NE(heading, std::string::npos) << help.output;
  std::istringstream lines(help.output.substr(heading));
  std::string line;
  int listed = 0;
  std::getline(lines, line);  // the heading
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0) {
    if (line.size() < 3 || line[2] == ' ') continue;  // a description's continuation
    std::istringstream words(line);
    std::string name;
    words >> name;
    ++listed;
    EXPECT_NE(all.find(" " + name + " "), std::string::npos) << name << " not offered: " << all;
  }
  EXPECT_GE(listed, 10) << help.output;
}

}  // namespace
}  // namespace hg
