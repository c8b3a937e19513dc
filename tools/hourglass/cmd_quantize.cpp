// hourglass quantize CHECKPOINT [--calib-images N] [--method minmax|percentile|entropy|mse]
//                            [--out PATH] [--device DEV] [--set key=value ...] [--no-eval] [--json]
//
// A trained ResNet as an INT8 model (infer/int8_network.h): batch norm folded into the
// convolutions, the first N training images (unaugmented, in the dataset's order) run through
// the float graph to calibrate every activation, weights quantised per output channel. Writes
// <CHECKPOINT's stem>.int8.safetensors beside it unless --out names the file (an existing file is
// never replaced), with the method, the calibration data, the source and the run's config (its
// [engine] included) in the metadata. Then, unless --no-eval, reports the test accuracy of the
// folded float graph and of the INT8 model, on the same device.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hourglass/base/error.h"
#include "hourglass/infer/calibration.h"
#include "hourglass/infer/inference_graph.h"
#include "hourglass/infer/int8_network.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/evaluate.h"
#include "hourglass/train/run/checkpoint.h"
#include "hourglass/train/training_setup.h"

namespace hg::cli {

namespace {

// The first `limit` images of `loader`'s epoch 0, each batch handed to `fn` on `device`.
void for_calibration_batches(data::DataLoader& loader, Device device, int64_t limit,
                             const std::function<void(const Tensor&)>& fn) {
  int64_t seen = 0;
  loader.start_epoch(0);
  while (seen < limit) {
    auto batch = loader.next();
    if (!batch) break;
    Tensor images = batch->images;
    if (images.size(0) > limit - seen) images = images.narrow(0, 0, limit - seen);
    seen += images.size(0);
    fn(loader.model_images(images, device));
  }
}

}  // namespace

Runner add_quantize(CLI::App& app) {
  struct Args {
    std::string checkpoint;
    int64_t calib_images = 1024;
    std::string method = "mse";
    std::string out;
    std::string device;
    std::vector<std::string> overrides;
    bool no_eval = false;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      "Quantise a trained ResNet to INT8: batch norm folded, activations calibrated on training "
      "images, weights per output channel; writes an .int8.safetensors model that hourglass "
      "eval runs, and reports the float and INT8 test accuracy.");
  sub->add_option("checkpoint", args->checkpoint, "final.safetensors or a checkpoint of a run")
      ->required();
  sub->add_option("--calib-images", args->calib_images,
                  "training images to calibrate on (the first N, unaugmented)")
      ->capture_default_str();
  sub->add_option("--method", args->method,
                  "how an activation's range is chosen: minmax, percentile (99.99%), entropy "
                  "(KL divergence) or mse")
      ->capture_default_str();
  sub->add_option("--out", args->out,
                  "the file to write (default: CHECKPOINT's name with .int8.safetensors); an "
                  "existing file is refused");
  sub->add_option("--device", args->device,
                  "calibrate and evaluate on this device (cpu, gpu:N) instead of the stored one");
  sub->add_option("--set", args->overrides,
                  "override a stored config key, e.g. --set data.path=/data/cifar (repeatable)");
  sub->add_flag("--no-eval", args->no_eval, "write the model without evaluating it");
  sub->add_flag("--json", args->json,
                "print the result as one JSON object (out, method, calib_images, and unless "
                "--no-eval float_accuracy, int8_accuracy, images)");
  return [args] {
    const infer::CalibrationMethod method = infer::calibration_method_from_name(args->method);
    HG_CHECK(args->calib_images > 0, "--calib-images must be positive, got {}", args->calib_images);
    const SafetensorsFile file = train::read_checkpoint(args->checkpoint);
    auto it = file.metadata.find(train::kConfigMetadataKey);
    if (it == file.metadata.end())
      throw_invalid(fmt::format("{}: no '{}' metadata: not a model written by hourglass train",
                                args->checkpoint, train::kConfigMetadataKey));
    const std::string stored_config = it->second;
    Config config = Config::parse(stored_config, args->checkpoint + " (stored config)");
    for (const auto& o : args->overrides) config.set_override(o);
    HG_CHECK(!config.has("rl.env") && !config.has("rl.algorithm"),
             "{}: an agent of a reinforcement-learning run; quantize takes classifiers",
             args->checkpoint);
    const std::string model_name = config.get_string("model.name", "small_cnn");
    HG_CHECK(model_name == "resnet18" || model_name == "resnet34" || model_name == "resnet50",
             "{}: model '{}' has no INT8 graph here: resnet18, resnet34 and resnet50 do",
             args->checkpoint, model_name);
    if (!args->device.empty()) config.set_override("device=\"" + args->device + "\"");
    // The float graph runs in f32 wherever it runs.
    config.set_override("precision=\"fp32\"");
    train::RunConfig run = train::parse_run_config(config);
    std::string out = args->out;
    if (out.empty()) {
      const std::filesystem::path p(args->checkpoint);
      out = (p.parent_path() / (p.stem().string() + ".int8.safetensors")).string();
    }
    HG_CHECK(!std::filesystem::exists(out),
             "quantize: {} exists already; it is left as it is (pass --out to write elsewhere)",
             out);

    train::RunParts parts = train::build_run_parts(run, true);
    train::load_model_state(*parts.model, file);
    std::map<std::string, Tensor> state;
    for (const auto& [name, t] : parts.model->state_dict()) state.emplace(name, t);
    const Device device = run.device;
    const infer::InferenceGraph graph = infer::graph_on(
        infer::resnet_inference_graph(state, config.get_string("model.stem", "cifar")), device);

    auto calib = train::make_eval_loader(run, parts.train_set);
    int64_t used = 0;
    const std::vector<double> thresholds =
        infer::calibrate_thresholds(graph, method, [&](const auto& use) {
          used = 0;
          for_calibration_batches(*calib, device, args->calib_images, [&](const Tensor& x) {
            used += x.size(0);
            use(x);
          });
        });
    const infer::Int8Network net = infer::Int8Network::quantize(graph, thresholds);

    save_safetensors(out, net.tensors(),
                     {{infer::kFormatMetadataKey, infer::kInt8Format},
                      {infer::kGraphMetadataKey, net.graph_json()},
                      {train::kConfigMetadataKey, stored_config},
                      {"hourglass.int8.method", infer::calibration_method_name(method)},
                      {"hourglass.int8.calib_images", std::to_string(used)},
                      {"hourglass.int8.calib_data",
                       fmt::format("the first {} images of the training split, unaugmented", used)},
                      {"hourglass.int8.source", args->checkpoint},
                      {"hourglass.model", model_name}});
    nlohmann::ordered_json result = {
        {"out", out}, {"method", infer::calibration_method_name(method)}, {"calib_images", used}};
    if (!args->no_eval) {
      auto test = train::make_eval_loader(run, parts.test_set);
      const train::EvalResult f = train::evaluate_logits(
          *test, device, [&](const Tensor& x) { return infer::run_float(graph, x); });
      const infer::Int8Network on_device = net.on(device);
      const train::EvalResult q =
          train::evaluate_logits(*test, device, [&](const Tensor& x) { return on_device.run(x); });
      result["float_accuracy"] = f.accuracy;
      result["int8_accuracy"] = q.accuracy;
      result["images"] = q.samples;
      result["int8_seconds"] = q.seconds;
    }
    if (args->json) {
      std::printf("%s\n", result.dump().c_str());
      return 0;
    }
    std::printf("%s: %s as INT8, %s calibration on %lld training images\n", out.c_str(),
                model_name.c_str(), args->method.c_str(), static_cast<long long>(used));
    if (!args->no_eval)
      std::printf(
          "test accuracy: float %.4f, int8 %.4f (%+.2f points; %lld images on %s)\n",
          result["float_accuracy"].get<double>(), result["int8_accuracy"].get<double>(),
          100.0 * (result["int8_accuracy"].get<double>() - result["float_accuracy"].get<double>()),
          static_cast<long long>(result["images"].get<int64_t>()), device.str().c_str());
    return 0;
  };
}

}  // namespace hg::cli
