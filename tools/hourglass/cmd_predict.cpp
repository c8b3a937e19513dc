// hourglass predict MODEL PATH... [--top-k K] [--json] [--device DEV] [--batch N] [--set k=v]
//
// The classes a trained model (final.safetensors or a checkpoint, in the precision it trained
// in on a GPU, f32 on the CPU) or an INT8 model (hourglass quantize's) gives image files: each
// PATH is a JPEG or PNG, or a folder searched for them (recursively, in name order). Each image
// becomes the model's input as data/image_input.h describes, the model's dataset's
// normalisation applied; the dataset itself is not read. Prints each image's top classes with
// their softmax probabilities, or one JSON object with --json.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/autograd/tape.h"
#include "hourglass/base/error.h"
#include "hourglass/data/image_input.h"
#include "hourglass/infer/int8_network.h"
#include "hourglass/nn/models.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/step/execution_context.h"

namespace hg::cli {

namespace {

namespace fs = std::filesystem;

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// The files PATHs name: files as given, folders searched recursively for images, sorted.
std::vector<std::string> image_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::recursive_directory_iterator(p, ec))
        if (e.is_regular_file() && is_image_file(e.path())) found.push_back(e.path().string());
      HG_CHECK(!ec, "predict: cannot read folder {}: {}", p, ec.message());
      HG_CHECK(!found.empty(), "predict: folder {} holds no .jpg, .jpeg or .png files", p);
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      HG_CHECK(fs::exists(p, ec), "predict: {} does not exist (check the path)", p);
      out.push_back(p);
    }
  }
  return out;
}

// The input a model of `run`'s dataset takes: height, width, channels.
Shape input_shape(const train::RunConfig& run, const std::string& source) {
  const std::string& d = run.data.dataset;
  if (d == "fashion-mnist" || d == "mnist") return {28, 28, 1};
  if (d == "cifar10" || d == "cifar100") return {32, 32, 3};
  if (d == "folder") return {run.data.image_size, run.data.image_size, 3};
  if (d == "synthetic")
    return {run.data.synthetic.synthetic_height, run.data.synthetic.synthetic_width,
            run.data.synthetic.synthetic_channels};
  throw_invalid(fmt::format("{}: dataset '{}' has no known input shape for predict", source, d));
}

// The number of classes a model's weights give: its classifier's rows (fc.weight, else the last
// 2-D weight).
int64_t classes_of(const std::vector<NamedTensor>& tensors, const std::string& source) {
  const Tensor* last = nullptr;
  for (const NamedTensor& t : tensors) {
    if (t.name.rfind(train::kOptimPrefix, 0) == 0 || t.name.rfind(train::kEmaPrefix, 0) == 0)
      continue;
    if (t.name == "fc.weight") return t.tensor.size(0);
    if (t.tensor.dim() == 2 && t.name.size() > 7 &&
        t.name.compare(t.name.size() - 7, 7, ".weight") == 0)
      last = &t.tensor;
  }
  HG_CHECK(last != nullptr, "{}: no classifier weight found", source);
  return last->size(0);
}

}  // namespace

Runner add_predict(CLI::App& app) {
  struct Args {
    std::string model;
    std::vector<std::string> paths;
    int64_t top_k = 1;
    bool json = false;
    std::string device;
    int64_t batch = 64;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "predict",
      "Classify image files with a trained model or an INT8 model: each image's top classes "
      "and their probabilities.");
  sub->add_option("model", args->model,
                  "final.safetensors, a checkpoint, or an .int8.safetensors from quantize")
      ->required();
  sub->add_option("paths", args->paths, "JPEG or PNG files, or folders holding them")->required();
  sub->add_option("--top-k", args->top_k, "classes to print per image")->capture_default_str();
  sub->add_flag("--json", args->json,
                "print one JSON object: model, format, images [{path, top [{class, "
                "probability}]}]");
  sub->add_option("--device", args->device,
                  "run on this device (cpu, gpu:N) instead of the stored one");
  sub->add_option("--batch", args->batch, "images per forward pass")->capture_default_str();
  sub->add_option("--set", args->overrides, "override a stored config key (repeatable)");
  return [args] {
    HG_CHECK(args->top_k > 0, "--top-k must be positive, got {}", args->top_k);
    HG_CHECK(args->batch > 0, "--batch must be positive, got {}", args->batch);
    const auto meta = read_safetensors_metadata(args->model);
    auto format = meta.find(infer::kFormatMetadataKey);
    const bool int8 = format != meta.end() && format->second == infer::kInt8Format;
    const SafetensorsFile file =
        int8 ? load_safetensors(args->model) : train::read_checkpoint(args->model);
    auto config_text = file.metadata.find(train::kConfigMetadataKey);
    if (config_text == file.metadata.end())
      throw_invalid(fmt::format("{}: no '{}' metadata: not a model written by hourglass",
                                args->model, train::kConfigMetadataKey));
    Config config = Config::parse(config_text->second, args->model + " (stored config)");
    for (const auto& o : args->overrides) config.set_override(o);
    HG_CHECK(!config.has("rl.env") && !config.has("rl.algorithm"),
             "{}: an agent of a reinforcement-learning run; predict takes classifiers",
             args->model);
    if (!args->device.empty()) config.set_override("device=\"" + args->device + "\"");
    if (int8 || Device::parse(config.get_string("device", "cpu")).is_cpu())
      config.set_override("precision=\"fp32\"");
    const train::RunConfig run = train::parse_run_config(config);
    const Device device = run.device;
    const Shape in = input_shape(run, args->model);
    const data::ImageTransform transform(run.data.transform, in[0], in[1], in[2]);
    const bool antialias = run.data.eval_antialias;
    const int64_t classes = classes_of(file.tensors, args->model);

    std::function<Tensor(const Tensor&)> logits_of;
    std::shared_ptr<nn::Module> model;
    std::shared_ptr<infer::Int8Network> net;
    if (int8) {
      auto graph = file.metadata.find(infer::kGraphMetadataKey);
      HG_CHECK(graph != file.metadata.end(), "{}: no '{}' metadata", args->model,
               infer::kGraphMetadataKey);
      net = std::make_shared<infer::Int8Network>(
          infer::Int8Network::load(file.tensors, graph->second, args->model).on(device));
      logits_of = [net](const Tensor& x) { return net->run(x); };
    } else {
      nn::ModelSpec spec = run.model;
      spec.height = in[0], spec.width = in[1], spec.in_channels = in[2];
      spec.num_classes = classes;
      model = nn::make_model(spec);
      train::load_model_state(*model, file);
      model->to(device);
      model->eval();
      logits_of = [model, context = train::ExecutionContext::from_run(run)](const Tensor& x) {
        train::ExecutionScope scope(context);
        return model->forward(x);
      };
    }

    const std::vector<std::string> paths = image_paths(args->paths);
    const int64_t k = std::min(args->top_k, classes);
    const int64_t per_image = in[0] * in[1] * in[2];
    nlohmann::ordered_json images = nlohmann::ordered_json::array();
    autograd::NoGradGuard no_grad;
    for (size_t begin = 0; begin < paths.size(); begin += size_t(args->batch)) {
      const size_t end = std::min(paths.size(), begin + size_t(args->batch));
      std::vector<float> pixels;
      pixels.reserve(size_t(int64_t(end - begin) * per_image));
      for (size_t i = begin; i < end; ++i) {
        const std::vector<float> one =
            data::image_as_model_input(data::read_image(paths[i]), transform, antialias);
        pixels.insert(pixels.end(), one.begin(), one.end());
      }
      const Tensor x =
          Tensor::from_vector(pixels, {int64_t(end - begin), in[0], in[1], in[2]}).to(device);
      const Tensor logits = logits_of(x).to(Device::cpu()).to(DType::F32).contiguous();
      for (size_t i = begin; i < end; ++i) {
        const float* row = logits.data<float>() + int64_t(i - begin) * classes;
        // Softmax in double, from the largest logit.
        const double top = *std::max_element(row, row + classes);
        double sum = 0;
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(row[c]) - top);
        std::vector<int64_t> order(static_cast<size_t>(classes));
        for (int64_t c = 0; c < classes; ++c) order[size_t(c)] = c;
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return row[a] > row[b]; });
        nlohmann::ordered_json best = nlohmann::ordered_json::array();
        for (int64_t j = 0; j < k; ++j) {
          const int64_t c = order[size_t(j)];
          best.push_back({{"class", c}, {"probability", std::exp(double(row[c]) - top) / sum}});
        }
        images.push_back({{"path", paths[i]}, {"top", best}});
      }
    }
    if (args->json) {
      const nlohmann::ordered_json out = {{"model", args->model},
                                          {"format", int8 ? "int8" : "float"},
                                          {"device", device.str()},
                                          {"images", images}};
      std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    for (const auto& image : images) {
      std::string line = image["path"].get<std::string>() + ":";
      for (const auto& t : image["top"])
        line += fmt::format(" class {} ({:.4f})", t["class"].get<int64_t>(),
                            t["probability"].get<double>());
      std::printf("%s\n", line.c_str());
    }
    return 0;
  };
}

}  // namespace hg::cli
