// End-to-end tests of the hourglass binary: training from a config, evaluation of the written
// checkpoint, determinism, and the one-line errors (exit code 2) for malformed input.
#include <gtest/gtest.h>

#include "hourglass/ops/backend.h"

#include "support/temp_dir.h"

#include <zlib.h>
#include "support/run_binary.h"

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hourglass/tensor/safetensors.h"

namespace hg {
namespace {

namespace fs = std::filesystem;

const std::string kConfigs = HG_SOURCE_DIR "/configs";
const std::string kFashion = "/usr/share/datasets/fashion-mnist";

using Result = hg::test::RunResult;

Result run(const std::string& args) { return hg::test::run_hourglass(args); }

std::string temp_dir(const std::string& name) {
  return test::fresh_temp_dir("hourglass_cli_" + name);
}

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const auto pos = t.rfind('\n');
  return pos == std::string::npos ? t : t.substr(pos + 1);
}

// A bad-input failure: exit code 2 and a last line "hourglass: error: ..." naming `needle`.
void expect_input_error(const Result& r, const std::string& needle) {
  EXPECT_EQ(r.code, 2) << r.output;
  const std::string line = last_line(r.output);
  EXPECT_EQ(line.rfind("hourglass: error: ", 0), 0u) << r.output;
  EXPECT_NE(line.find(needle), std::string::npos) << "expected '" << needle << "' in: " << line;
}

bool have_fashion_mnist() { return fs::exists(kFashion + "/train-images-idx3-ubyte.gz"); }

TEST(Cli, HelpListsEverySubcommand) {
  Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* sub : {"train", "eval", "info", "bench", "plan", "doctor", "pack", "launch",
                          "monitor", "profile", "report"})
    EXPECT_NE(r.output.find(std::string("\n  ") + sub), std::string::npos) << sub;
  EXPECT_EQ(run("train --help").code, 0);
  EXPECT_EQ(run("report --help").code, 0);
}

TEST(Cli, TrainsSmallCnnOnFashionMnistSubsetAndEvalReadsItBack) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = temp_dir("fashion");
  Result r = run("train " + kConfigs + "/quickstart.toml --no-progress --run-dir " + dir +
                 " --set train.epochs=2 --set data.train_limit=12000 --set data.test_limit=2000");
  ASSERT_EQ(r.code, 0) << r.output;
  // metrics.jsonl: one line per epoch with the documented keys.
  std::ifstream metrics(dir + "/metrics.jsonl");
  std::string line;
  std::vector<nlohmann::json> epochs;
  while (std::getline(metrics, line)) epochs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(epochs.size(), 2u);
  for (const char* key : {"epoch", "train_loss", "train_acc", "test_acc", "images_per_s"})
    EXPECT_TRUE(epochs[1].contains(key)) << key;
  EXPECT_LT(epochs[1]["train_loss"].get<double>(), epochs[0]["train_loss"].get<double>());
  const double acc = epochs[1]["test_acc"].get<double>();
  // A small CNN reaches ~85% on 12k Fashion-MNIST images in two epochs; 0.8 leaves margin
  // for seeds while far above chance (0.1) and above what a broken gradient reaches.
  EXPECT_GE(acc, 0.80);
  EXPECT_LE(acc, 1.0);
  EXPECT_TRUE(fs::exists(dir + "/config.toml"));

  Result e = run("eval " + dir + "/final.safetensors");
  ASSERT_EQ(e.code, 0) << e.output;
  char expected[64];
  std::snprintf(expected, sizeof expected, "test accuracy %.4f", acc);
  EXPECT_NE(e.output.find(expected), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("(fp32, 2000 images"), std::string::npos) << e.output;
  // A checkpoint of a GPU run in bf16 (here: its stored config says so) evaluates on the cpu
  // with --device cpu: in bf16 where the cpu has it, else in f32.
  Result g = run("eval " + dir +
                 "/final.safetensors --set 'device=\"gpu:0\"' "
                 "--set 'precision=\"bf16\"' --device cpu");
  ASSERT_EQ(g.code, 0) << g.output;
  if (backend_for(Device::cpu()).compute_dtype_problem(DType::BF16).empty()) {
    EXPECT_NE(g.output.find("(bf16, 2000 images"), std::string::npos) << g.output;
    const size_t at = g.output.find("test accuracy ");
    ASSERT_NE(at, std::string::npos) << g.output;
    EXPECT_NEAR(std::stod(g.output.substr(at + 14)), acc, 0.02) << g.output;
  } else {
    EXPECT_NE(g.output.find(expected), std::string::npos) << g.output;
    EXPECT_NE(g.output.find("evaluating in fp32"), std::string::npos) << g.output;
  }
}

TEST(Cli, SameSeedGivesBitIdenticalWeights) {
  std::vector<std::string> dirs = {temp_dir("det_a"), temp_dir("det_b")};
  for (const auto& dir : dirs) {
    Result r = run("train " + kConfigs + "/quickstart.toml --no-progress --run-dir " + dir +
                   " --set data.dataset=synthetic --set data.synthetic.train_size=256"
                   " --set data.synthetic.test_size=64 --set data.synthetic.height=16"
                   " --set data.synthetic.width=16 --set data.augment=true --set model.dropout=0.2"
                   " --set train.batch_size=32 --set train.epochs=2 --set data.workers=2");
    ASSERT_EQ(r.code, 0) << r.output;
  }
  SafetensorsFile a = load_safetensors(dirs[0] + "/final.safetensors");
  SafetensorsFile b = load_safetensors(dirs[1] + "/final.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &ta = a.tensors[i].tensor, &tb = b.tensors[i].tensor;
    ASSERT_EQ(ta.nbytes(), tb.nbytes());
    EXPECT_EQ(std::memcmp(ta.data_ptr(), tb.data_ptr(), ta.nbytes()), 0) << a.tensors[i].name;
  }
}

TEST(Cli, BadConfigInputsAreOneLineErrors) {
  const std::string cfg = kConfigs + "/quickstart.toml";
  expect_input_error(run("train /nonexistent/run.toml"), "/nonexistent/run.toml");
  expect_input_error(run("train " + cfg + " --set train.epochs=ten"), "train.epochs");
  expect_input_error(run("train " + cfg + " --set model.name=resnet19"), "resnet19");
  expect_input_error(run("train " + cfg + " --set optim.lr=-1"), "optim.lr");
  expect_input_error(run("train " + cfg + " --set data.dataset=imagenet"), "imagenet");
  expect_input_error(run("train " + cfg + " --set device=tpu"), "tpu");
  expect_input_error(run("train " + cfg + " --checkpoint-every-steps -1"),
                     "--checkpoint-every-steps");
  expect_input_error(run("launch --grace nan --nproc 1 -- info"), "--grace");
  expect_input_error(run("launch --grace 1e10 --nproc 1 -- info"), "--grace");
  const std::string dir = temp_dir("badtoml");
  std::ofstream(dir + "/broken.toml") << "[train\nepochs = 1\n";
  expect_input_error(run("train " + dir + "/broken.toml"), "broken.toml");
}

// Writes an IDX file set into `dir` where the training images are replaced by `images`.
void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

TEST(Cli, MalformedDataFilesAreOneLineErrors) {
  const std::string dir = temp_dir("baddata");
  const std::string cfg = kConfigs + "/quickstart.toml";
  // Missing files.
  expect_input_error(run("train " + cfg + " --set data.path=" + dir), dir);
  // Valid test split, broken train split variants.
  std::string test_images =
      be32(0x803) + be32(2) + be32(28) + be32(28) + std::string(2 * 784, '\0');
  std::string test_labels = be32(0x801) + be32(2) + std::string("\x01\x02", 2);
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", test_images);
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", test_labels);
  write_gz(dir + "/train-labels-idx1-ubyte.gz", be32(0x801) + be32(2) + std::string("\x01\x03", 2));
  // Bad magic number.
  write_gz(dir + "/train-images-idx3-ubyte.gz", be32(0x1234) + be32(2) + be32(28) + be32(28));
  expect_input_error(run("train " + cfg + " --set data.path=" + dir), "magic");
  // Truncated images.
  write_gz(dir + "/train-images-idx3-ubyte.gz",
           be32(0x803) + be32(2) + be32(28) + be32(28) + std::string(100, '\0'));
  expect_input_error(run("train " + cfg + " --set data.path=" + dir), "train-images-idx3-ubyte.gz");
  // Label out of range.
  write_gz(dir + "/train-images-idx3-ubyte.gz",
           be32(0x803) + be32(2) + be32(28) + be32(28) + std::string(2 * 784, '\0'));
  write_gz(dir + "/train-labels-idx1-ubyte.gz", be32(0x801) + be32(2) + std::string("\x01\x0c", 2));
  expect_input_error(run("train " + cfg + " --set data.path=" + dir), "label");
}

TEST(Cli, CorruptCheckpointIsAOneLineError) {
  const std::string dir = temp_dir("badckpt");
  expect_input_error(run("eval " + dir + "/missing.safetensors"), "missing.safetensors");
  std::ofstream(dir + "/garbage.safetensors") << "not a safetensors file at all";
  expect_input_error(run("eval " + dir + "/garbage.safetensors"),
                     "garbage.safetensors is not a safetensors checkpoint");
  // A valid file without hourglass's config metadata.
  save_safetensors(dir + "/plain.safetensors", {{"w", Tensor::zeros({2})}});
  expect_input_error(run("eval " + dir + "/plain.safetensors"), "hourglass.config");
}

}  // namespace
}  // namespace hg
