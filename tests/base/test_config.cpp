#include "hourglass/base/config.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include "support/expect_error.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "hourglass/base/duration.h"
#include "hourglass/base/error.h"
#include "hourglass/base/plural.h"

namespace hg {
namespace {

const char* kRunToml = R"(name = "baseline"
seed = 7

[train]
epochs = 10
lr = 0.1
nesterov = true
milestones = [30, 60]
betas = [0.9, 1]

[data]
dataset = "cifar10"
files = ["a.bin", "b.bin"]
limit = 3.0
)";

using test::expect_invalid;

TEST(Config, TypedGettersWithDottedKeys) {
  const Config c = Config::parse(kRunToml, "run.toml");
  EXPECT_EQ(c.source(), "run.toml");
  EXPECT_EQ(c.get_string("name", ""), "baseline");
  EXPECT_EQ(c.get_int("seed", 0), 7);
  EXPECT_EQ(c.get_int("train.epochs", 1), 10);
  EXPECT_EQ(c.get_double("train.lr", 0), 0.1);
  EXPECT_EQ(c.get_double("train.epochs", 0), 10.0);  // an integer reads as a float
  EXPECT_TRUE(c.get_bool("train.nesterov", false));
  EXPECT_EQ(c.get_string_list("data.files", {}), (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(c.get_int_list("train.milestones", {}), (std::vector<int64_t>{30, 60}));
  EXPECT_EQ(c.get_double_list("train.betas", {}), (std::vector<double>{0.9, 1.0}));
  // Defaults for absent keys, including under absent tables.
  EXPECT_EQ(c.get_int("train.warmup", 5), 5);
  EXPECT_EQ(c.get_string("model.name", "resnet18"), "resnet18");
  EXPECT_EQ(c.get_string_list("model.tags", {"x"}), (std::vector<std::string>{"x"}));
  EXPECT_TRUE(c.has("train.lr"));
  EXPECT_FALSE(c.has("train.momentum"));
  EXPECT_FALSE(c.has("model.depth"));
  EXPECT_EQ(c.require_int("train.epochs"), 10);
  EXPECT_EQ(c.require_string("data.dataset"), "cifar10");
}

TEST(Config, MissingAndMistypedKeysNameKeyFileAndTypes) {
  const Config c = Config::parse(kRunToml, "run.toml");
  expect_invalid(
      [&] { c.require_int("train.batch_size"); },
      {"'train.batch_size'", "missing", "run.toml", "under [train]", "--set train.batch_size="});
  expect_invalid([&] { c.require_string("run_name"); }, {"'run_name'", "at the top"});
  expect_invalid(
      [&] { c.get_int("data.dataset", 0); },
      {"'data.dataset'", "run.toml:12", "must be an integer", "found a string", "\"cifar10\""});
  expect_invalid([&] { c.get_int("data.limit", 0); },
                 {"'data.limit'", "must be an integer", "found a float 3.0", "decimal point"});
  expect_invalid([&] { c.get_bool("train.lr", false); },
                 {"must be a boolean", "found a float 0.1"});
  expect_invalid([&] { c.get_string("train", ""); }, {"must be a string", "found a table"});
  expect_invalid([&] { c.get_int_list("data.files", {}); },
                 {"'data.files'", "an array of integers", "element 0 a string \"a.bin\""});
  expect_invalid([&] { c.get_string_list("data.dataset", {}); },
                 {"an array of strings", "found a string"});
  expect_invalid([&] { c.get_int("train.epochs.max", 0); },
                 {"'train.epochs.max'", "'train.epochs'", "an integer, not a table"});
}

TEST(Config, SyntaxAndFileErrorsNameTheLocation) {
  const Error e =
      expect_invalid([] { Config::parse("[train]\nepochs = = 3\n", "bad.toml"); }, {"bad.toml:2:"});
  EXPECT_FALSE(e.remedy().empty());
  // The config is a positional argument (hourglass train CONFIG): there is no --config flag.
  const Error missing = expect_invalid(
      [] { Config::load("/nonexistent/run.toml"); },
      {"/nonexistent/run.toml", "does not exist", "config path given to the command"});
  EXPECT_EQ(missing.one_line().find("--config"), std::string::npos) << missing.one_line();

  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("hg_config_{}.toml", ::getpid()))
          .string();
  std::ofstream(path) << kRunToml;
  const Config c = Config::load(path);
  EXPECT_EQ(c.source(), path);
  EXPECT_EQ(c.get_int("train.epochs", 0), 10);
  expect_invalid([&] { c.get_bool("train.epochs", false); }, {path + ":5"});
  std::ofstream(path) << "x = [1,\n";
  expect_invalid([&] { Config::load(path); }, {path + ":"});
  std::filesystem::remove(path);
}

// Found by fuzz/fuzz_config: a quoted key with spaces ("\t\tseed" = 1) was accepted and printed
// unquoted by to_toml, so the resolved config read back as another key. Keys must be bare
// names, in files as on the command line.
TEST(Config, QuotedKeysThatAreNotPlainNamesAreRefused) {
  expect_invalid([] { Config::parse("\"\t\tseed4m\"= \"x\"\n", "odd.toml"); },
                 {"'\\x09\\x09seed4m'", "odd.toml:1", "not a plain name"});
  expect_invalid([] { Config::parse("[train]\n\"batch size\" = 3\n", "odd.toml"); },
                 {"'train.batch size'", "odd.toml:2"});
  expect_invalid([] { Config::parse("[[runs]]\n\"a.b\" = 1\n", "odd.toml"); }, {"'runs.a.b'"});
  // Quoting a plain name is fine.
  EXPECT_EQ(Config::parse("[train]\n\"epochs\" = 3\n", "ok.toml").get_int("train.epochs", 0), 3);
}

// Found by fuzz/fuzz_config: a string starting with a newline was printed by to_toml as a
// multi-line literal whose first newline TOML drops, so the resolved config read back changed.
TEST(Config, StringsWithControlCharactersAreRefused) {
  expect_invalid([] { Config::parse("[schedule]\nname = \"\\ne\"\n", "odd.toml"); },
                 {"'schedule.name'", "odd.toml:2", "control character", "\\x0ae"});
  expect_invalid([] { Config::parse("list = [\"a\", \"b\\tc\"]\n", "odd.toml"); }, {"'list'"});
  EXPECT_EQ(Config::parse("name = \"plain text\"\n", "ok.toml").get_string("name", ""),
            "plain text");
}

TEST(Config, OverridesParseTomlValuesAndCreateTables) {
  Config c = Config::parse(kRunToml, "run.toml");
  c.set_override("train.lr=0.01");
  c.set_override("train.epochs = 3");
  c.set_override("train.nesterov=false");
  c.set_override("data.dataset=\"mnist\"");
  c.set_override("data.files=[\"c.bin\"]");
  c.set_override("data.root=/tmp/data dir");  // a bare word falls back to a string
  c.set_override("model.name=resnet18");      // creates [model]
  c.set_override("model.block.width=64");     // creates nested tables
  c.set_override("run.date=2024-05-01");      // a date stays text
  c.set_override("optim={name = \"adamw\", lr = 0.001}");
  EXPECT_EQ(c.get_double("train.lr", 0), 0.01);
  EXPECT_EQ(c.get_int("train.epochs", 0), 3);
  EXPECT_FALSE(c.get_bool("train.nesterov", true));
  EXPECT_EQ(c.get_string("data.dataset", ""), "mnist");
  EXPECT_EQ(c.get_string_list("data.files", {}), (std::vector<std::string>{"c.bin"}));
  EXPECT_EQ(c.get_string("data.root", ""), "/tmp/data dir");
  EXPECT_EQ(c.get_string("model.name", ""), "resnet18");
  EXPECT_EQ(c.get_int("model.block.width", 0), 64);
  EXPECT_EQ(c.get_string("run.date", ""), "2024-05-01");
  EXPECT_EQ(c.get_string("optim.name", ""), "adamw");

  // A wrong type from --set is reported against the --set, not the file.
  c.set_override("train.epochs=ten");
  expect_invalid([&] { c.get_int("train.epochs", 0); },
                 {"'train.epochs'", "from --set train.epochs=ten", "found a string \"ten\""});
  expect_invalid([&] { c.get_bool("optim.lr", false); }, {"from --set optim={name"});
  // A newline in a --set value stays out of the message: one line, the byte escaped.
  c.set_override("train.epochs=3\nx");
  try {
    c.get_int("train.epochs", 0);
    ADD_FAILURE() << "a string was read as an integer";
  } catch (const Error& e) {
    EXPECT_EQ(e.message().find('\n'), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("found a string \"3\\x0ax\""), std::string::npos) << e.message();
  }

  expect_invalid([&] { c.set_override("train.epochs"); }, {"key=value"});
  expect_invalid([&] { c.set_override("=3"); }, {"not a valid key"});
  expect_invalid([&] { c.set_override("train..lr=3"); }, {"not a valid key"});
  expect_invalid([&] { c.set_override("train.lr="); }, {"empty value"});
  expect_invalid([&] { c.set_override("data.files=[1, 2"); }, {"not valid TOML"});
  expect_invalid([&] { c.set_override("data.dataset=\"unterminated"); }, {"not valid TOML"});
  expect_invalid([&] { c.set_override("seed.value=3"); },
                 {"'seed'", "in run.toml:2", "an integer, not a table"});
  expect_invalid([&] { c.set_override("train=3"); }, {"'train' is a table", "train.NAME"});
}

TEST(Config, ResolvedTomlRoundTrips) {
  Config c = Config::parse(kRunToml, "run.toml");
  c.set_override("train.lr=0.05");
  c.set_override("model.name=resnet18");
  const std::string text = c.to_toml();
  EXPECT_NE(text.find("# --set train.lr=0.05"), std::string::npos) << text;
  const Config back = Config::parse(text, "resolved.toml");
  EXPECT_EQ(back.keys(), c.keys());
  EXPECT_EQ(back.get_double("train.lr", 0), 0.05);
  EXPECT_EQ(back.get_string("model.name", ""), "resnet18");
  EXPECT_EQ(back.get_int_list("train.milestones", {}), (std::vector<int64_t>{30, 60}));
  EXPECT_EQ(back.get_string_list("data.files", {}), (std::vector<std::string>{"a.bin", "b.bin"}));
  EXPECT_EQ(back.get_double("data.limit", 0), 3.0);
}

// Floats print in the shortest form that reads back to the same double (toml++ alone writes
// 0.05 as 0.050000000000000003), in tables, arrays, arrays of tables and --set values; a
// string that looks like the placeholders used on the way stays a string.
TEST(Config, ResolvedTomlPrintsFloatsShortestAndExact) {
  Config c = Config::parse(
      "lr = 0.05\nmomentum = 0.1\neps = 1e-4\ntiny = 1e-12\nwhole = 3.0\nbig = 1e300\n"
      "third = 0.3333333333333333\ncount = 3\nname = \"hourglass-float-0-0\"\n"
      "[data]\nmean = [0.4914, 0.4822, 0.4465]\n[[runs]]\nlr = 0.25\n",
      "floats.toml");
  c.set_override("optim.weight_decay=5e-4");
  const std::string text = c.to_toml();
  for (const char* expected :
       {"\nlr = 0.05\n", "\nmomentum = 0.1\n", "\neps = 0.0001\n", "\ntiny = 1e-12\n",
        "\nwhole = 3.0\n", "\nbig = 1e+300\n", "\nthird = 0.3333333333333333\n", "\ncount = 3\n",
        "0.4914, 0.4822, 0.4465", "\nlr = 0.25\n", "\nweight_decay = 0.0005\n",
        "hourglass-float-0-0"})
    EXPECT_NE(text.find(expected), std::string::npos) << "'" << expected << "' not in:\n" << text;
  EXPECT_EQ(text.find("00000"), std::string::npos) << text;

  const Config back = Config::parse(text, "resolved.toml");
  EXPECT_EQ(back.keys(), c.keys());
  for (const char* key :
       {"lr", "momentum", "eps", "tiny", "whole", "big", "third", "optim.weight_decay"})
    EXPECT_EQ(std::bit_cast<uint64_t>(back.get_double(key, 0)),
              std::bit_cast<uint64_t>(c.get_double(key, 0)))
        << key;
  EXPECT_EQ(back.get_double_list("data.mean", {}), c.get_double_list("data.mean", {}));
  EXPECT_EQ(back.get_int("count", 0), 3);
  EXPECT_EQ(back.get_string("name", ""), "hourglass-float-0-0");
}

TEST(Config, UnusedKeysListsWhatWasNeverRead) {
  Config c = Config::parse(kRunToml, "run.toml");
  c.set_override("train.epoch=3");  // a typo for train.epochs
  c.get_int("train.epochs", 0);
  c.get_string("name", "");
  c.get_int("seed", 0);
  c.get_double("train.lr", 0);
  c.get_bool("train.nesterov", false);
  c.get_int_list("train.milestones", {});
  c.get_double_list("train.betas", {});
  c.get_string("data.dataset", "");
  c.has("data.files");  // checking presence is not reading
  EXPECT_EQ(c.unused_keys(), (std::vector<std::string>{"data.files", "data.limit", "train.epoch"}));
  // Copies keep what was read.
  const Config copy = c;
  EXPECT_EQ(copy.unused_keys().size(), 3u);
}

TEST(Config, UnusedKeysAreRefusedWithTheClosestKnownKey) {
  Config c = Config::parse("[train]\nepoch = 3\nbatch = 8\n[optim]\nmomentum = 0.9\n", "run.toml");
  c.set_override("optim.lrr=0.1");
  c.get_int("train.epochs", 1);      // absent keys asked for count as known
  c.get_int("train.batch_size", 1);  // too far from "batch": no suggestion by spelling
  c.get_double("optim.lr", 0.1);
  c.has("train.momentum");  // asked for in another table
  EXPECT_EQ(c.closest_known_key("train.epoch"), "train.epochs");
  EXPECT_EQ(c.closest_known_key("optim.lrr"), "optim.lr");
  EXPECT_EQ(c.closest_known_key("optim.momentum"), "train.momentum");  // the same name
  EXPECT_EQ(c.closest_known_key("data.something_else"), "");
  expect_invalid([&] { c.reject_unused_keys(); },
                 {"unknown config key 'train.epoch' in run.toml:2 (did you mean 'train.epochs'?)",
                  "'optim.lrr' from --set optim.lrr=0.1 (did you mean 'optim.lr'?)",
                  "'optim.momentum' in run.toml:5 (did you mean 'train.momentum'?)",
                  "'train.batch' in run.toml:3; ", "fix the key's spelling or remove it"});
  c.get_int("train.epoch", 0);
  c.get_int("train.batch", 0);
  c.get_double("optim.lrr", 0);
  c.get_double("optim.momentum", 0);
  c.reject_unused_keys();  // every key read: no error
}

TEST(Config, FloatGettersRefuseNanAndInfinityNamingTheKey) {
  const Config c = Config::parse(
      "[schedule]\nwarmup_epochs = nan\nmin_lr = inf\n"
      "[optim]\nlr = -inf\nbetas = [0.9, nan]\n",
      "run.toml");
  expect_invalid([&] { c.get_double("schedule.warmup_epochs", 0.0); },
                 {"schedule.warmup_epochs", "run.toml:2", "finite", "nan"});
  expect_invalid([&] { c.require_double("schedule.min_lr"); },
                 {"schedule.min_lr", "run.toml:3", "finite", "inf"});
  expect_invalid([&] { c.get_double("optim.lr", 0.1); }, {"optim.lr", "run.toml:5", "finite"});
  expect_invalid([&] { c.get_double_list("optim.betas", {}); }, {"optim.betas", "nan"});

  Config overridden = Config::parse("", "run.toml");
  overridden.set_override("train.label_smoothing=nan");
  expect_invalid([&] { overridden.get_double("train.label_smoothing", 0.0); },
                 {"train.label_smoothing", "--set train.label_smoothing=nan", "finite"});
  EXPECT_EQ(overridden.origin("train.label_smoothing"), "from --set train.label_smoothing=nan");
  EXPECT_EQ(Config::parse("x = 1.5", "run.toml").get_double("x", 0.0), 1.5);
}

TEST(Plural, CountAndNoun) {
  EXPECT_EQ(plural(1, "thread"), "1 thread");
  EXPECT_EQ(plural(2, "thread"), "2 threads");
  EXPECT_EQ(plural(0, "epoch"), "0 epochs");
  EXPECT_EQ(plural(1, "batch", "batches"), "1 batch");
  EXPECT_EQ(plural(3, "batch", "batches"), "3 batches");
  EXPECT_EQ(plural(size_t(1), "shard"), "1 shard");
}

TEST(Duration, ParsesUnitsAndCombinations) {
  EXPECT_EQ(parse_duration_seconds("90s"), 90);
  EXPECT_EQ(parse_duration_seconds("10m"), 600);
  EXPECT_EQ(parse_duration_seconds("2h"), 7200);
  EXPECT_EQ(parse_duration_seconds("1h30m"), 5400);
  EXPECT_EQ(parse_duration_seconds("1h 30m 15s"), 5415);
  EXPECT_EQ(parse_duration_seconds("1.5h"), 5400);
  EXPECT_EQ(parse_duration_seconds("200h"), 720000);
  EXPECT_EQ(parse_duration_seconds("2d"), 172800);
  EXPECT_EQ(parse_duration_seconds("250ms"), 0.25);
  EXPECT_EQ(parse_duration_seconds("45"), 45);
  EXPECT_EQ(parse_duration_seconds(" 2.5 "), 2.5);
  EXPECT_EQ(parse_duration_seconds("0"), 0);
}

TEST(Duration, ErrorsNameTheText) {
  for (const char* bad : {"", "abc", "10x", "-5s", "1h30", "h", "1..5h", "5 s m", "1e3s"}) {
    SCOPED_TRACE(bad);
    const Error e =
        expect_invalid([&] { parse_duration_seconds(bad); }, {fmt::format("'{}'", bad), "1h30m"});
  }
}

TEST(Duration, FormatsClockStyle) {
  EXPECT_EQ(format_duration_clock(35), "0:35");
  EXPECT_EQ(format_duration_clock(723.4), "12:03");
  EXPECT_EQ(format_duration_clock(3723), "1:02:03");
  EXPECT_EQ(format_duration_clock(100000), "27:46:40");
  EXPECT_EQ(format_duration_clock(-1), "?");
  EXPECT_EQ(format_duration_clock(NAN), "?");
}

}  // namespace
}  // namespace hg
