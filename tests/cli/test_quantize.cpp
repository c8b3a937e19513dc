// hourglass quantize and hourglass eval of its INT8 model: a trained ResNet-18 (CIFAR stem,
// narrow) on synthetic images becomes an .int8.safetensors file with its method, calibration data
// and config recorded; eval of that file gives the accuracy quantize reported; an existing output,
// an unknown method and a model without an INT8 graph are refused with their names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hourglass/infer/int8_network.h"
#include "hourglass/tensor/safetensors.h"
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
  std::string out, log;
};

Result run(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kBinary};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = dir + "/log.txt";
  const pid_t pid = test::spawn_logged(argv, log, {});
  const std::optional<int> status = test::wait_status(pid, 300);
  EXPECT_TRUE(status.has_value());
  const std::string text = read_file(log);
  // The JSON result is the log's last line.
  const size_t last = text.find_last_of('{');
  return {status ? test::exit_code(*status) : -1,
          last == std::string::npos ? std::string() : text.substr(last), text};
}

std::string trained(const std::string& name, const std::string& model) {
  const std::string d = test::fresh_temp_dir("hourglass_cli_quantize_" + name);
  std::ofstream(d + "/run.toml") << R"(
name = "q"
seed = 3
threads = 2
[model]
name = ")" << model << R"("
)" << (model == "mlp" ? "" : "channels = 8\n")
                                 << R"([data]
dataset = "synthetic"
synthetic = { train_size = 64, test_size = 48, height = 16, width = 16, channels = 3, classes = 4 }
[train]
epochs = 2
batch_size = 16
[metrics]
every_steps = 0
)";
  const Result r = run(d, {"train", d + "/run.toml", "--run-dir", d + "/run", "--no-progress"});
  EXPECT_EQ(r.code, 0) << r.log;
  return d;
}

TEST(CliQuantize, WritesAnInt8ModelThatEvalRuns) {
  const std::string d = trained("write", "resnet18");
  const std::string model = d + "/run/final.safetensors";
  const Result q = run(d, {"quantize", model, "--calib-images", "40", "--method", "percentile",
                           "--json", "--log-level", "warn"});
  ASSERT_EQ(q.code, 0) << q.log;
  const nlohmann::json result = nlohmann::json::parse(q.out);
  const std::string out = d + "/run/final.int8.safetensors";
  EXPECT_EQ(result["out"], out);
  EXPECT_EQ(result["calib_images"], 40);
  EXPECT_EQ(result["images"], 48);
  const auto meta = read_safetensors_metadata(out);
  EXPECT_EQ(meta.at(infer::kFormatMetadataKey), infer::kInt8Format);
  EXPECT_EQ(meta.at("hourglass.int8.method"), "percentile");
  EXPECT_EQ(meta.at("hourglass.int8.calib_images"), "40");
  EXPECT_NE(meta.at("hourglass.config").find("[engine]"), std::string::npos);
  const SafetensorsFile file = load_safetensors(out);
  bool s8_weights = false;
  for (const NamedTensor& t : file.tensors)
    if (t.name == "layer1.0.conv1.weight") s8_weights = t.tensor.dtype() == DType::I8;
  EXPECT_TRUE(s8_weights);

  const Result e = run(d, {"eval", out, "--json", "--log-level", "warn"});
  ASSERT_EQ(e.code, 0) << e.log;
  const nlohmann::json eval = nlohmann::json::parse(e.out);
  EXPECT_EQ(eval["format"], "int8");
  EXPECT_EQ(eval["images"], 48);
  EXPECT_EQ(eval["accuracy"].get<double>(), result["int8_accuracy"].get<double>());

  // The file exists now: a second quantize refuses to replace it and leaves it as it is.
  const std::string before = read_file(out);
  const Result again = run(d, {"quantize", model});
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.log.find("final.int8.safetensors exists already"), std::string::npos)
      << again.log;
  EXPECT_EQ(read_file(out), before);
  const Result method =
      run(d, {"quantize", model, "--method", "kl", "--out", d + "/x.safetensors"});
  EXPECT_EQ(method.code, 2);
  EXPECT_NE(method.log.find("calibration method 'kl' is unknown"), std::string::npos) << method.log;
  EXPECT_FALSE(fs::exists(d + "/x.safetensors"));
}

TEST(CliQuantize, RefusesAModelWithoutAnInt8Graph) {
  const std::string d = trained("mlp", "mlp");
  const Result q = run(d, {"quantize", d + "/run/final.safetensors"});
  EXPECT_EQ(q.code, 2);
  EXPECT_NE(q.log.find("model 'mlp' has no INT8 graph here"), std::string::npos) << q.log;
}

}  // namespace
}  // namespace hg
