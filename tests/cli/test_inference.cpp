// hourglass quantize, hourglass eval of its INT8 model and hourglass predict: a trained ResNet-18
// (CIFAR stem, narrow) on synthetic images becomes an .int8.safetensors file with its method,
// calibration data and config recorded; eval of that file gives the accuracy quantize reported;
// predict gives image files the classes and probabilities the models give the same inputs in
// this process; the INT8 model exported as ONNX (QDQ) gives its logits in an independent NumPy
// evaluation; an existing output, an unknown method and a model without an INT8 graph are
// refused with their names.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/image_fixtures.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/data/image_input.h"
#include "hourglass/infer/int8_network.h"
#include "hourglass/nn/models.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/checkpoint.h"
#include "support/run_binary.h"
#include "support/run_files.h"
#include "support/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using test::read_file;

struct Result {
  int code = -1;
  std::string out, log;  // stdout (the JSON result with --json); stdout and stderr
};

// hourglass with `args`, each quoted for the shell (`dir` is where the test works).
Result run(const std::string& dir, const std::vector<std::string>& args) {
  std::string line = "--log-level warn";
  for (const std::string& a : args) line += " '" + a + "'";
  const test::SplitRunResult r = test::run_hourglass_split(line);
  return {r.code, r.out, r.out + r.err};
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
  const Result q =
      run(d, {"quantize", model, "--calib-images", "40", "--method", "percentile", "--json"});
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

  const Result e = run(d, {"eval", out, "--json"});
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

// Softmax probabilities of one row of logits, in double.
std::vector<double> softmax(const float* row, int64_t n) {
  const double top = *std::max_element(row, row + n);
  std::vector<double> p(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[size_t(i)] = std::exp(double(row[i]) - top);
  for (double& v : p) v /= sum;
  return p;
}

TEST(CliPredict, GivesTheModelsClassesForImageFiles) {
  const std::string d = trained("predict", "resnet18");
  const std::string model = d + "/run/final.safetensors";
  fs::create_directories(d + "/images/more");
  for (int i = 0; i < 3; ++i) {
    const data::test::Bytes png = data::test::png_of(16, 16, 10 + i);
    std::ofstream(d + "/images/img" + std::to_string(i) + ".png", std::ios::binary)
        .write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
  }
  // Another size: resized and centre-cropped to 16 x 16.
  const data::test::Bytes jpeg = data::test::jpeg_of(40, 30, 20);
  std::ofstream(d + "/images/more/big.jpg", std::ios::binary)
      .write(reinterpret_cast<const char*>(jpeg.data()), std::streamsize(jpeg.size()));
  std::ofstream(d + "/images/notes.txt") << "not an image";

  const Result r = run(d, {"predict", model, d + "/images", "--top-k", "3", "--json"});
  ASSERT_EQ(r.code, 0) << r.log;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out["images"].size(), 4u) << r.log;  // the folders' images, in name order
  EXPECT_EQ(out["images"][0]["path"], d + "/images/img0.png");
  EXPECT_EQ(out["images"][3]["path"], d + "/images/more/big.jpg");

  // The same inputs through the model in this process.
  const SafetensorsFile file = train::read_checkpoint(model);
  const train::RunConfig cfg = train::parse_run_config(
      Config::parse(file.metadata.at(train::kConfigMetadataKey), "stored config"));
  const data::ImageTransform transform(cfg.data.transform, 16, 16, 3);
  nn::ModelSpec spec = cfg.model;
  spec.height = spec.width = 16;
  spec.in_channels = 3;
  spec.num_classes = 4;
  auto net = nn::make_model(spec);
  train::load_model_state(*net, file);
  net->eval();
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < 4; ++i) {
    const std::string path = out["images"][i]["path"];
    const std::vector<float> pixels = data::image_as_model_input(data::read_image(path), transform);
    const Tensor logits = net->forward(Tensor::from_vector(pixels, {1, 16, 16, 3})).contiguous();
    const std::vector<double> p = softmax(logits.data<float>(), 4);
    const auto& top = out["images"][i]["top"];
    ASSERT_EQ(top.size(), 3u);
    for (size_t j = 0; j < 3; ++j) {
      const int64_t c = top[j]["class"];
      EXPECT_NEAR(top[j]["probability"].get<double>(), p[size_t(c)], 1e-6) << path;
      if (j > 0)
        EXPECT_GE(top[j - 1]["probability"].get<double>(), top[j]["probability"].get<double>());
    }
    EXPECT_EQ(top[0]["class"].get<int64_t>(), std::max_element(p.begin(), p.end()) - p.begin());
  }

  // The INT8 model: the classes its network gives here.
  const std::string int8 = d + "/run/final.int8.safetensors";
  ASSERT_EQ(run(d, {"quantize", model, "--calib-images", "32", "--no-eval"}).code, 0);
  const Result q = run(d, {"predict", int8, d + "/images/img1.png", "--json"});
  ASSERT_EQ(q.code, 0) << q.log;
  const nlohmann::json qo = nlohmann::json::parse(q.out);
  EXPECT_EQ(qo["format"], "int8");
  const SafetensorsFile qf = load_safetensors(int8);
  const infer::Int8Network qnet =
      infer::Int8Network::load(qf.tensors, qf.metadata.at(infer::kGraphMetadataKey), int8);
  const std::vector<float> img1 =
      data::image_as_model_input(data::read_image(d + "/images/img1.png"), transform);
  const Tensor ql = qnet.run(Tensor::from_vector(img1, {1, 16, 16, 3})).contiguous();
  const std::vector<double> qp = softmax(ql.data<float>(), 4);
  EXPECT_EQ(qo["images"][0]["top"][0]["class"].get<int64_t>(),
            std::max_element(qp.begin(), qp.end()) - qp.begin());
  EXPECT_NEAR(qo["images"][0]["top"][0]["probability"].get<double>(),
              *std::max_element(qp.begin(), qp.end()), 1e-6);

#ifdef HOURGLASS_HAS_ONNX
  // The INT8 model as ONNX (QuantizeLinear/DequantizeLinear pairs), checked by onnx.checker
  // and evaluated by an independent NumPy interpreter (Debian's python3-onnx): the network's
  // logits, up to an activation step where float and double scales round apart.
  const Result e = run(d, {"export", int8, "--format", "onnx"});
  ASSERT_EQ(e.code, 0) << e.log;
  std::vector<float> nchw(img1.size());
  for (size_t c = 0; c < 3; ++c)
    for (size_t i = 0; i < 256; ++i) nchw[c * 256 + i] = img1[i * 3 + c];
  std::ofstream(d + "/img1.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(nchw.data()), std::streamsize(nchw.size() * 4));
  const std::string cmd = "/usr/bin/python3 " HG_SOURCE_DIR "/tests/tools/onnx_numpy_eval.py " + d +
                          "/run/final.int8.onnx " + d + "/img1.f32 1,3,16,16 > " + d +
                          "/onnx.json 2> " + d + "/onnx.err";
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << read_file(d + "/onnx.err") << " (needs python3-onnx: scripts/install-deps.sh --test)";
  const nlohmann::json onnx = nlohmann::json::parse(read_file(d + "/onnx.json"));
  double scale = 0;
  for (int64_t c = 0; c < 4; ++c) scale = std::max(scale, std::fabs(double(ql.data<float>()[c])));
  for (int64_t c = 0; c < 4; ++c)
    EXPECT_NEAR(onnx["logits"][0][size_t(c)].get<double>(), ql.data<float>()[c], 0.02 * (1 + scale))
        << "class " << c;
#endif

  const Result missing = run(d, {"predict", model, d + "/nothing.png"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.log.find("nothing.png does not exist"), std::string::npos) << missing.log;
}

TEST(CliQuantize, RefusesAModelWithoutAnInt8Graph) {
  const std::string d = trained("mlp", "mlp");
  const Result q = run(d, {"quantize", d + "/run/final.safetensors"});
  EXPECT_EQ(q.code, 2);
  EXPECT_NE(q.log.find("model 'mlp' has no INT8 graph here"), std::string::npos) << q.log;
}

}  // namespace
}  // namespace hg
