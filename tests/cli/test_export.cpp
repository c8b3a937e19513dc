// hourglass export --format torch and onnx, and model.init_from: a trained ResNet-18 (ImageNet
// stem) in PyTorch's layout loads strictly into torchvision's resnet18 (Debian's
// python3-torchvision) and gives hourglass's logits; as ONNX it passes onnx.checker and, run by an
// independent NumPy interpreter, gives them too; read back by model.init_from it is the same
// weights bit for bit; init_exclude keeps a classifier of another size; the errors name every
// missing or mis-shaped tensor, the refused formats and models, and an existing output file, which
// is left as it is.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "hourglass/autograd/tape.h"
#include "hourglass/base/rng.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/torch_layout.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/run/checkpoint.h"
#include "support/expect_error.h"
#include "support/run_files.h"
#include "support/spawn.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using test::read_file;

const std::string kBinary = HG_BINARY_DIR "/hourglass";

struct Result {
  int code = -1;
  std::string log;
};

Result run(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = dir + "/log.txt";
  const pid_t pid = test::spawn_logged(argv, log, {});
  const std::optional<int> status = test::wait_status(pid, 300);
  EXPECT_TRUE(status.has_value());
  return {status ? test::exit_code(*status) : -1, read_file(log)};
}

nn::ModelSpec resnet18_spec(int64_t classes) {
  nn::ModelSpec spec;
  spec.name = "resnet18";
  spec.stem = "imagenet";
  spec.in_channels = 3;
  spec.height = spec.width = 32;
  spec.num_classes = classes;
  return spec;
}

// A trained ResNet-18 with the ImageNet stem on synthetic 32x32 RGB images (one epoch of two
// steps), in a directory of the test's own (CTest runs the tests as processes side by side).
std::string trained_dir(const std::string& name) {
  const std::string dir = [&] {
    const std::string d = test::fresh_temp_dir("hourglass_cli_export_" + name);
    std::ofstream(d + "/r18.toml") << R"(
name = "r18"
seed = 3
threads = 2
[model]
name = "resnet18"
stem = "imagenet"
[data]
dataset = "synthetic"
synthetic = { train_size = 16, test_size = 8, height = 32, width = 32, channels = 3, classes = 10 }
[train]
epochs = 1
batch_size = 8
[metrics]
every_steps = 0
)";
    const Result r = run(d, {"train", d + "/r18.toml", "--run-dir", d + "/run", "--no-progress"});
    EXPECT_EQ(r.code, 0) << r.log;
    return d;
  }();
  return dir;
}

// Runs tests/tools/`script` with `args` under Debian's python3 and reads the JSON it prints
// into `out`; a failure (the tool's stderr, and the package it needs) is a test failure.
testing::AssertionResult run_python_tool(const std::string& d, const std::string& script,
                                         const std::string& args, const std::string& package,
                                         nlohmann::json& out) {
  const std::string cmd = "/usr/bin/python3 " HG_SOURCE_DIR "/tests/tools/" + script + " " + args +
                          " > " + d + "/tool.json 2> " + d + "/tool.err";
  if (std::system(cmd.c_str()) != 0)
    return testing::AssertionFailure()
           << script << " failed: " << read_file(d + "/tool.err") << "\n(the test needs Debian's "
           << package << ": scripts/install-deps.sh --test)";
  out = nlohmann::json::parse(read_file(d + "/tool.json"));
  return testing::AssertionSuccess();
}

// hourglass's logits of the trained model in `d` for two fixed 32x32 RGB images, which are
// written NCHW to d/input.f32 for the other frameworks.
std::vector<float> hourglass_logits(const std::string& d) {
  const int64_t n = 2, h = 32, w = 32, c = 3;
  std::vector<float> nhwc(static_cast<size_t>(n * h * w * c)), nchw(nhwc.size());
  RandomStream rng(11, 0);
  for (float& v : nhwc) v = 2 * rng.uniform() - 1;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k)
          nchw[size_t(((i * c + k) * h + y) * w + x)] = nhwc[size_t(((i * h + y) * w + x) * c + k)];
  std::ofstream(d + "/input.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(nchw.data()), std::streamsize(nchw.size() * 4));
  auto model = nn::make_model(resnet18_spec(10));
  train::load_model_state(*model, train::read_checkpoint(d + "/run/final.safetensors"));
  model->eval();
  autograd::NoGradGuard no_grad;
  return model->forward(Tensor::from_vector(nhwc, {n, h, w, c})).to_vector<float>();
}

// `theirs` (JSON logits [2][10]) equal to hourglass's within f32 rounding of the sums.
void expect_same_logits(const nlohmann::json& theirs, const std::vector<float>& ours) {
  double scale = 0;
  for (float v : ours) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < 2; ++i)
    for (size_t k = 0; k < 10; ++k)
      EXPECT_NEAR(theirs[i][k].get<double>(), ours[i * 10 + k], 1e-4 * (1 + scale))
          << "image " << i << " class " << k;
}

TEST(CliExport, TorchLayoutLoadsIntoTorchvisionWithTheSameLogits) {
  const std::string d = trained_dir("logits");
  const std::string out = d + "/r18.torch.safetensors";
  const Result e =
      run(d, {"export", d + "/run/final.safetensors", "--format", "torch", "--out", out});
  ASSERT_EQ(e.code, 0) << e.log;
  EXPECT_NE(e.log.find("tensors of resnet18 in PyTorch's layout"), std::string::npos) << e.log;
  const SafetensorsFile file = load_safetensors(out);
  EXPECT_EQ(file.at("conv1.weight").shape(), Shape({64, 3, 7, 7}));
  EXPECT_EQ(file.at("layer2.0.downsample.0.weight").shape(), Shape({128, 64, 1, 1}));
  EXPECT_EQ(file.at("fc.weight").shape(), Shape({10, 512}));
  EXPECT_EQ(file.at("bn1.num_batches_tracked").dtype(), DType::I64);
  for (const NamedTensor& t : file.tensors)
    EXPECT_EQ(t.name.rfind("optim.", 0), std::string::npos) << t.name;

  const std::vector<float> ours = hourglass_logits(d);
  nlohmann::json j;
  ASSERT_TRUE(run_python_tool(d, "torch_load_export.py",
                              out + " resnet18 10 --input " + d + "/input.f32 --shape 2,3,32,32",
                              "python3-torchvision", j));
  EXPECT_EQ(j["missing"].size(), 0u) << j.dump();
  EXPECT_EQ(j["unexpected"].size(), 0u) << j.dump();
  expect_same_logits(j["logits"], ours);

  // An existing file is refused and left as it is.
  const std::string before = read_file(out);
  const Result again =
      run(d, {"export", d + "/run/final.safetensors", "--format", "torch", "--out", out});
  EXPECT_EQ(again.code, 2) << again.log;
  EXPECT_NE(again.log.find("exists already"), std::string::npos) << again.log;
  EXPECT_EQ(read_file(out), before);
  const Result other = run(d, {"export", d + "/run/final.safetensors", "--format", "tflite"});
  EXPECT_EQ(other.code, 2) << other.log;
  EXPECT_NE(other.log.find("--format tflite"), std::string::npos) << other.log;
}

// The ONNX model passes onnx.checker (full check, strict shape inference; Debian's
// python3-onnx) and, evaluated by an independent NumPy interpreter, gives hourglass's logits.
TEST(CliExport, OnnxModelPassesTheCheckerAndGivesTheSameLogits) {
  const std::string d = trained_dir("onnx");
  const std::string out = d + "/r18.onnx";
  const Result e =
      run(d, {"export", d + "/run/final.safetensors", "--format", "onnx", "--out", out});
  ASSERT_EQ(e.code, 0) << e.log;
  EXPECT_NE(e.log.find("input [batch, 3, height, width]"), std::string::npos) << e.log;
  const std::vector<float> ours = hourglass_logits(d);
  nlohmann::json j;
  ASSERT_TRUE(run_python_tool(d, "onnx_numpy_eval.py", out + " " + d + "/input.f32 2,3,32,32",
                              "python3-onnx", j));
  EXPECT_EQ(j["opset"], 17);
  EXPECT_EQ(j["input"], "input");
  EXPECT_EQ(j["output"], "logits");
  expect_same_logits(j["logits"], ours);

  // float16: the weights rounded to it (the evaluator computes in float64 from them).
  const std::string half = d + "/r18.fp16.onnx";
  const Result h = run(d, {"export", d + "/run/final.safetensors", "--format", "onnx",
                           "--precision", "fp16", "--out", half});
  ASSERT_EQ(h.code, 0) << h.log;
  EXPECT_NE(h.log.find("float16"), std::string::npos) << h.log;
  ASSERT_TRUE(run_python_tool(d, "onnx_numpy_eval.py", half + " " + d + "/input.f32 2,3,32,32",
                              "python3-onnx", j));
  double scale = 0;
  for (float v : ours) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < 2; ++i)
    for (size_t k = 0; k < 10; ++k)
      EXPECT_NEAR(j["logits"][i][k].get<double>(), ours[i * 10 + k], 1e-2 * (1 + scale))
          << "fp16 image " << i << " class " << k;
}

TEST(CliExport, InitFromReadsBothLayoutsBitForBit) {
  const std::string d = trained_dir("init");
  const std::string torch_file = d + "/roundtrip.torch.safetensors";
  ASSERT_EQ(
      run(d, {"export", d + "/run/final.safetensors", "--format", "torch", "--out", torch_file})
          .code,
      0);
  const SafetensorsFile final_file = train::read_checkpoint(d + "/run/final.safetensors");
  for (const std::string& source : {torch_file, d + "/run/final.safetensors"}) {
    auto model = nn::make_model(resnet18_spec(10));
    const int64_t copied = nn::init_from_file(*model, "resnet18", source, {});
    EXPECT_EQ(copied, int64_t(model->state_dict().size())) << source;
    for (const auto& [name, t] : model->state_dict())
      EXPECT_EQ(t.to_vector<float>(), final_file.at(name).to_vector<float>())
          << source << " " << name;
  }
  // Another number of classes: the classifier excluded keeps its own initial values.
  auto five = nn::make_model(resnet18_spec(5));
  nn::initialize(*five, 9);
  const std::vector<float> fc_before = five->state_dict().back().second.to_vector<float>();
  EXPECT_EQ(nn::init_from_file(*five, "resnet18", torch_file, {"fc"}),
            int64_t(five->state_dict().size()) - 2);
  test::expect_invalid([&] { nn::init_from_file(*five, "resnet18", torch_file, {}); },
                       {"model.init_from", "fc.weight", "fc.bias", "init_exclude"});
  // A model the file's tensors do not belong to: every missing one counted.
  nn::ModelSpec r34 = resnet18_spec(10);
  r34.name = "resnet34";
  auto other = nn::make_model(r34);
  test::expect_invalid([&] { nn::init_from_file(*other, "resnet34", torch_file, {}); },
                       {"missing (", "layer1.2.conv1.weight", "more"});
}

TEST(CliExport, TrainingStartsFromInitFromAndRecordsIt) {
  const std::string d = trained_dir("train");
  std::string config = read_file(d + "/r18.toml");
  config.insert(config.find("[data]"), "init_from = \"" + d + "/run/final.safetensors\"\n");
  std::ofstream(d + "/from.toml") << config;
  const Result r = run(d, {"train", d + "/from.toml", "--run-dir", d + "/from", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.log;
  const size_t tensors = nn::make_model(resnet18_spec(10))->state_dict().size();
  EXPECT_NE(r.log.find(fmt::format("model.init_from {}/run/final.safetensors: {} tensors copied", d,
                                   tensors)),
            std::string::npos)
      << r.log;
  const Result shown = run(d, {"train", d + "/from.toml", "--print-config"});
  EXPECT_NE(shown.log.find("# model.init_from = \""), std::string::npos) << shown.log;
  const Result bad = run(d, {"train", d + "/from.toml", "--run-dir", d + "/bad", "--set",
                             "model.init_from=\"" + d + "/nothing.safetensors\""});
  EXPECT_EQ(bad.code, 2) << bad.log;
  EXPECT_NE(bad.log.find("nothing.safetensors"), std::string::npos) << bad.log;
  const Result small = run(d, {"train", d + "/from.toml", "--run-dir", d + "/bad2", "--set",
                               "model.name=\"small_cnn\""});
  EXPECT_EQ(small.code, 2) << small.log;
  EXPECT_NE(small.log.find("no PyTorch layout"), std::string::npos) << small.log;
}

}  // namespace
}  // namespace hg
