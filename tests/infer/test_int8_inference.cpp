// The inference path: a ResNet's folded inference graph computes the model's own eval-mode
// logits; the calibration methods pick the thresholds known distributions call for; the INT8
// network follows the float graph, and saves and loads bit for bit.
#include <gtest/gtest.h>

#include <cmath>

#include "hourglass/autograd/tape.h"
#include "hourglass/base/rng.h"
#include "hourglass/infer/calibration.h"
#include "hourglass/infer/inference_graph.h"
#include "hourglass/infer/int8_network.h"
#include "hourglass/nn/models.h"
#include "hourglass/ops/ops.h"
#include "support/compare.h"

namespace hg {
namespace {

using infer::ActivationHistogram;
using infer::CalibrationMethod;

// A small ResNet with running statistics far from the defaults (so folding matters).
std::shared_ptr<nn::Module> small_resnet(const std::string& name, const std::string& stem,
                                         uint64_t seed) {
  nn::ModelSpec spec;
  spec.name = name;
  spec.stem = stem;
  spec.in_channels = 3;
  spec.height = spec.width = 16;
  spec.num_classes = 7;
  spec.base_channels = 8;
  std::shared_ptr<nn::Module> model = nn::make_model(spec);
  nn::initialize(*model, seed);
  uint64_t k = seed * 1000;
  for (auto& [name_, t] : model->state_dict()) {
    if (t.dtype() != DType::F32) continue;
    const bool var = name_.find("running_var") != std::string::npos;
    const bool bn = name_.find("bn") != std::string::npos || name_.find(".1.") != std::string::npos;
    if (!bn && !var && name_.find("running_mean") == std::string::npos) continue;
    const std::vector<double> v =
        test::random_values(t.numel(), ++k, var ? 0.5 : -0.5, var ? 2.0 : 0.5);
    t.copy_(Tensor::from_vector(v, t.shape()).to(DType::F32));
  }
  model->eval();
  return model;
}

std::map<std::string, Tensor> state_of(const nn::Module& model) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : model.state_dict()) state.emplace(name, t);
  return state;
}

Tensor random_images(int64_t n, uint64_t seed) {
  return Tensor::from_vector(test::random_values(n * 16 * 16 * 3, seed, -2.0, 2.0), {n, 16, 16, 3})
      .to(DType::F32);
}

double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = test::to_doubles(a), y = test::to_doubles(b);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) num += (x[i] - y[i]) * (x[i] - y[i]), den += y[i] * y[i];
  return std::sqrt(num / den);
}

TEST(InferenceGraph, FoldedGraphGivesTheModelsLogits) {
  for (const auto& [name, stem] :
       {std::pair<std::string, std::string>{"resnet18", "cifar"}, {"resnet50", "imagenet"}}) {
    const auto model = small_resnet(name, stem, 3);
    const Tensor x = random_images(4, 5);
    autograd::NoGradGuard no_grad;
    const Tensor expected = model->forward(x);
    const infer::InferenceGraph g = infer::resnet_inference_graph(state_of(*model), stem);
    int seen = 0;
    const Tensor got = infer::run_float(g, x, [&](int, const Tensor&) { ++seen; });
    EXPECT_EQ(seen, g.num_values) << name;
    EXPECT_LT(relative_error(got, expected), 1e-5) << name;
  }
}

TEST(InferenceGraph, MissingTensorIsNamed) {
  auto state = state_of(*small_resnet("resnet18", "cifar", 3));
  state.erase("layer2.0.bn1.running_var");
  try {
    infer::resnet_inference_graph(state, "cifar");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer2.0.bn1.running_var"), std::string::npos)
        << e.what();
  }
}

// Counts of |x| over [0, amax] in ActivationHistogram::kBins bins from a density.
std::vector<double> histogram_of(const std::function<double(double)>& density, double amax) {
  std::vector<double> counts(ActivationHistogram::kBins);
  for (size_t i = 0; i < counts.size(); ++i)
    counts[i] = std::round(1e7 * density((double(i) + 0.5) * amax / double(counts.size())) * amax /
                           double(counts.size()));
  return counts;
}

TEST(Calibration, MethodsOnKnownDistributions) {
  // |N(0, 1)| with one outlier at 40: the clipping methods cut far below it.
  const double amax = 40;
  std::vector<double> gauss =
      histogram_of([](double x) { return 2 * std::exp(-x * x / 2) / std::sqrt(2 * M_PI); }, amax);
  gauss.back() += 1;
  EXPECT_EQ(ActivationHistogram::threshold(CalibrationMethod::MinMax, gauss, amax), amax);
  const double p = ActivationHistogram::threshold(CalibrationMethod::Percentile, gauss, amax);
  EXPECT_NEAR(p, 3.89, 0.05);  // the 99.99th percentile of |N(0,1)|
  const double mse = ActivationHistogram::threshold(CalibrationMethod::Mse, gauss, amax);
  const double kl = ActivationHistogram::threshold(CalibrationMethod::Entropy, gauss, amax);
  EXPECT_GT(mse, 2.5);
  EXPECT_LT(mse, 8.0);
  EXPECT_GT(kl, 2.5);
  EXPECT_LT(kl, 12.0);
  // A uniform |x| on [0, 10]: nothing to gain by clipping.
  const std::vector<double> uniform = histogram_of([](double) { return 0.1; }, 10.0);
  EXPECT_GT(ActivationHistogram::threshold(CalibrationMethod::Mse, uniform, 10.0), 9.8);
  EXPECT_GT(ActivationHistogram::threshold(CalibrationMethod::Percentile, uniform, 10.0), 9.99);
  EXPECT_GT(ActivationHistogram::threshold(CalibrationMethod::Entropy, uniform, 10.0), 9.0);
  // Normalised image pixels: half of them one background value (a spike at 0.4 amax), the rest
  // spread up to amax. Clipping at the spike would wipe out the bright pixels.
  std::vector<double> pixels = histogram_of([](double) { return 0.05; }, 2.0);
  pixels[size_t(0.4 * ActivationHistogram::kBins)] += 1e6;
  EXPECT_GT(ActivationHistogram::threshold(CalibrationMethod::Entropy, pixels, 2.0), 1.8);
  EXPECT_GT(ActivationHistogram::threshold(CalibrationMethod::Mse, pixels, 2.0), 1.5);
  // Exact zeros (a ReLU's) stay out of the histogram.
  ActivationHistogram relu;
  const Tensor half_zero = Tensor::from_vector(std::vector<float>{0, 0, 0, 1.0f, 0.5f}, {5});
  relu.observe_range(half_zero);
  relu.observe_values(half_zero);
  double counted = 0;
  for (double c : relu.counts()) counted += c;
  EXPECT_EQ(counted, 2.0);
  EXPECT_EQ(relu.amax(), 1.0);
  // An all-zero tensor still has a usable scale.
  EXPECT_GT(ActivationHistogram::threshold(CalibrationMethod::Entropy, uniform, 0.0), 0.0);
  EXPECT_THROW(infer::calibration_method_from_name("kl"), Error);
}

// Calibrated with `method` over `images`, as hourglass quantize does.
infer::Int8Network quantized(const infer::InferenceGraph& g, const Tensor& images,
                             CalibrationMethod method) {
  return infer::Int8Network::quantize(
      g, infer::calibrate_thresholds(g, method, [&](const auto& use) { use(images); }));
}

TEST(Int8Network, FollowsTheFloatGraphAndRoundTrips) {
  for (const auto& [name, stem] :
       {std::pair<std::string, std::string>{"resnet18", "cifar"}, {"resnet50", "imagenet"}}) {
    const auto model = small_resnet(name, stem, 4);
    const infer::InferenceGraph g = infer::resnet_inference_graph(state_of(*model), stem);
    const infer::Int8Network net = quantized(g, random_images(16, 6), CalibrationMethod::MinMax);
    const Tensor x = random_images(8, 7);
    const Tensor logits = net.run(x);
    // 8-bit activations and weights through a dozen layers: 1-2% of the logits (measured).
    EXPECT_LT(relative_error(logits, infer::run_float(g, x)), 0.05) << name;

    const infer::Int8Network back =
        infer::Int8Network::load(net.tensors(), net.graph_json(), "test");
    EXPECT_EQ(test::to_doubles(back.run(x)), test::to_doubles(logits)) << name;
  }
}

TEST(Int8Network, LoadNamesWhatIsMissing) {
  const auto model = small_resnet("resnet18", "cifar", 4);
  const infer::InferenceGraph g = infer::resnet_inference_graph(state_of(*model), "cifar");
  const infer::Int8Network net = quantized(g, random_images(4, 6), CalibrationMethod::MinMax);
  std::vector<NamedTensor> tensors = net.tensors();
  std::erase_if(tensors, [](const NamedTensor& t) { return t.name == "layer1.0.conv2.weight"; });
  try {
    infer::Int8Network::load(tensors, net.graph_json(), "model.int8.safetensors");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("model.int8.safetensors: no tensor 'layer1.0.conv2.weight'"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(infer::Int8Network::load(net.tensors(), "{\"values\": 3}", "m"), Error);
}

}  // namespace
}  // namespace hg
