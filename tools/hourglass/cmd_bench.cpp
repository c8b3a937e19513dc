// hourglass bench MODEL: training and inference throughput of a model on synthetic,
// device-resident data (the numbers bench/ compares with PyTorch).
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/autograd/functions.h"
#include "hourglass/base/parallel.h"
#include "hourglass/base/rng.h"
#include "hourglass/nn/models.h"
#include "hourglass/nn/parameter_arena.h"
#include "hourglass/optim/sgd.h"

namespace hg::cli {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename Fn>
std::vector<double> time_steps(int warmup, int steps, Fn&& step) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  struct Args {
    std::string model = "resnet18-cifar";
    int64_t batch = 64, size = 32, in_channels = 3, classes = 10;
    int steps = 10, warmup = 3, threads = 0;
    std::string device = "cpu";
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Measure training and inference images/s of a model on synthetic data "
               "(median step after warm-up; SGD with Nesterov momentum).");
  sub->add_option("model", a->model,
                  "resnet18-cifar, resnet50 (ImageNet stem), small-cnn, or any model.name")
      ->capture_default_str();
  sub->add_option("--batch", a->batch, "batch size")->capture_default_str();
  sub->add_option("--size", a->size, "input height and width")->capture_default_str();
  sub->add_option("--in-channels", a->in_channels, "input channels")->capture_default_str();
  sub->add_option("--steps", a->steps, "timed steps")->capture_default_str();
  sub->add_option("--warmup", a->warmup, "untimed steps first")->capture_default_str();
  sub->add_option("--threads", a->threads, "CPU threads (0: all)")->capture_default_str();
  sub->add_option("--device", a->device, "cpu or gpu:N")->capture_default_str();
  sub->add_flag("--json", a->json, "print one JSON object");
  return [a] {
    if (a->threads > 0) set_num_threads(a->threads);
    nn::ModelSpec spec;
    spec.name = a->model;
    if (a->model == "resnet18-cifar") spec.name = "resnet18";
    if (a->model == "small-cnn") spec.name = "small_cnn";
    spec.stem = a->model == "resnet50" ? "imagenet" : "cifar";
    spec.in_channels = a->in_channels;
    spec.height = spec.width = a->size;
    spec.num_classes = a->classes;
    const Device device = Device::parse(a->device);
    auto model = nn::make_model(spec);
    nn::initialize(*model, 0);
    model->to(device);
    FlatParameters flat = nn::build_parameter_arena(*model, nn::DecayScope::All);
    SgdOptions so;
    so.lr = 0.01;
    so.momentum = 0.9;
    so.nesterov = true;
    so.weight_decay = 5e-4;
    optim::Sgd sgd(flat, so);

    RandomStream rng(1, 2);
    std::vector<float> pixels(size_t(a->batch * a->size * a->size * a->in_channels));
    for (auto& p : pixels) p = rng.normal();
    std::vector<int64_t> labels(size_t(a->batch));
    for (auto& l : labels) l = int64_t(rng.below(uint64_t(a->classes)));
    Tensor x = Tensor::from_vector(pixels, {a->batch, a->size, a->size, a->in_channels}).to(device);
    Tensor y = Tensor::from_vector(labels, {a->batch}).to(device);

    model->train();
    Tensor last_loss;
    auto train_ms = time_steps(a->warmup, a->steps, [&] {
      Tensor loss = fn::cross_entropy(model->forward(x), y, 0.0);
      autograd::backward(loss);
      sgd.step();
      sgd.zero_grad();
      last_loss = loss;
    });
    const double final_loss = last_loss.item();
    model->eval();
    auto eval_ms = time_steps(a->warmup, a->steps, [&] {
      autograd::NoGradGuard no_grad;
      // Reading one value waits for the device, so the step is timed to its end.
      (void)model->forward(x).narrow(0, 0, 1).narrow(1, 0, 1).item();
    });
    const double train = median(train_ms), eval = median(eval_ms);
    nlohmann::json r{{"framework", "hourglass"},
                     {"version", HOURGLASS_VERSION},
                     {"model", a->model},
                     {"batch", a->batch},
                     {"threads", num_threads()},
                     {"device", device.str()},
                     {"train_step_ms", train},
                     {"train_images_per_s", double(a->batch) * 1000.0 / train},
                     {"eval_step_ms", eval},
                     {"eval_images_per_s", double(a->batch) * 1000.0 / eval},
                     {"final_loss", final_loss}};
    if (a->json)
      std::printf("%s\n", r.dump().c_str());
    else
      std::printf("%s batch %lld on %s: train %.1f images/s (%.1f ms/step), eval %.1f images/s\n",
                  a->model.c_str(), static_cast<long long>(a->batch), device.str().c_str(),
                  r["train_images_per_s"].get<double>(), train, r["eval_images_per_s"].get<double>());
    return 0;
  };
}

}  // namespace hg::cli
