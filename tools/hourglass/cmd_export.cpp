// hourglass export MODEL --format torch|onnx [--out PATH] [--allow-unverified-checkpoint]
//
// torch: a trained model's weights in PyTorch's layout under torchvision's names
// (nn/torch_layout.h): safetensors that torchvision.models.resnet50().load_state_dict takes,
// with the ImageNet stem. onnx: a ResNet as an ONNX model, opset 17 (onnx_export.h). Writes
// <MODEL's stem>.torch.safetensors or .onnx beside MODEL unless --out names the file; an
// existing file is never replaced.
#include <filesystem>

#include "commands.h"
#include "hourglass/base/atomic_file.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/infer/int8_network.h"
#include "hourglass/nn/torch_layout.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/checkpoint.h"

#ifdef HOURGLASS_HAS_ONNX
#include "onnx_export.h"
#endif

namespace hg::cli {

Runner add_export(CLI::App& app) {
  struct Args {
    std::string model;
    std::string format;
    std::string out;
    std::string precision = "fp32";
    bool allow_unverified = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "export",
      "Write a trained model for another framework: --format torch, its weights in PyTorch's "
      "layout under torchvision's names (resnet18/34/50, mlp); --format onnx, a ResNet as an "
      "ONNX model (NCHW input of any size, logits out).");
  sub->add_option("model", args->model, "final.safetensors or a checkpoint of a run")->required();
  sub->add_option("--format", args->format, "torch (PyTorch's layout) or onnx (ResNets, opset 17)")
      ->required();
  sub->add_option("--out", args->out,
                  "the file to write (default: MODEL's name with .torch.safetensors or .onnx); "
                  "an existing file is refused");
  sub->add_option("--precision", args->precision,
                  "onnx: fp32, or fp16 (every tensor, the input and the logits float16)")
      ->capture_default_str();
  sub->add_flag("--allow-unverified-checkpoint", args->allow_unverified,
                "also read a checkpoint written before checkpoint-v3 (no whole-file checksum)");
  return [args] {
#ifdef HOURGLASS_HAS_ONNX
    HG_CHECK(args->format == "torch" || args->format == "onnx",
             "--format {}: the formats export writes are torch and onnx", args->format);
#else
    HG_CHECK(args->format == "torch",
             "--format {}: this build writes torch only (onnx needs libonnx-dev when it is built)",
             args->format);
#endif
    const auto meta = read_safetensors_metadata(args->model);
    auto format = meta.find(infer::kFormatMetadataKey);
    const bool int8 = format != meta.end() && format->second == infer::kInt8Format;
    HG_CHECK(args->precision == "fp32" || args->precision == "fp16",
             "--precision {}: export writes fp32 or fp16", args->precision);
    HG_CHECK(args->precision == "fp32" || (args->format == "onnx" && !int8),
             "--precision fp16 applies to --format onnx of a float model");
    HG_CHECK(!int8 || args->format == "onnx",
             "--format {}: an INT8 model (hourglass quantize's) is exported as onnx only",
             args->format);
    const SafetensorsFile file =
        int8 ? load_safetensors(args->model)
             : train::read_checkpoint(args->model, args->allow_unverified
                                                       ? train::CheckpointTrust::AllowUnverified
                                                       : train::CheckpointTrust::VerifiedOnly);
    auto it = file.metadata.find(train::kConfigMetadataKey);
    if (it == file.metadata.end())
      throw_invalid(fmt::format("{}: no '{}' metadata: not a model written by hourglass train",
                                args->model, train::kConfigMetadataKey));
    const Config config = Config::parse(it->second, args->model + " (stored config)");
    HG_CHECK(!config.has("rl.env") && !config.has("rl.algorithm"),
             "{}: an agent of a reinforcement-learning run; export writes classifiers",
             args->model);
    const std::string model_name = config.get_string("model.name", "small_cnn");
    std::vector<NamedTensor> state;
    for (const NamedTensor& t : file.tensors)
      if (t.name.rfind(train::kOptimPrefix, 0) != 0) state.push_back(t);
    const bool onnx = args->format == "onnx";
    std::string out = args->out;
    if (out.empty()) {
      std::filesystem::path p(args->model);
      out = (p.parent_path() / (p.stem().string() + (onnx ? ".onnx" : ".torch.safetensors")))
                .string();
    }
    HG_CHECK(!std::filesystem::exists(out),
             "export: {} exists already; it is left as it is (pass --out to write elsewhere)", out);
#ifdef HOURGLASS_HAS_ONNX
    if (onnx) {
      OnnxExportOptions o;
      o.model_name = model_name;
      o.stem = config.get_string("model.stem", "cifar");
      const Tensor* stem = nullptr;
      for (const NamedTensor& t : state)
        if (t.name == "stem.conv.weight") stem = &t.tensor;
      HG_CHECK(stem != nullptr || model_name.rfind("resnet", 0) != 0,
               "{}: no stem.conv.weight: not a ResNet's weights", args->model);
      o.in_channels = stem != nullptr ? stem->size(3) : 0;
      o.producer_version = HOURGLASS_VERSION;
      o.fp16 = args->precision == "fp16";
      if (int8) {
        auto graph = file.metadata.find(infer::kGraphMetadataKey);
        HG_CHECK(graph != file.metadata.end(), "{}: no '{}' metadata", args->model,
                 infer::kGraphMetadataKey);
        write_file_atomic(
            out,
            int8_onnx_model(infer::Int8Network::load(file.tensors, graph->second, args->model), o));
        std::printf(
            "%s: %s INT8 as ONNX (opset 17, QuantizeLinear/DequantizeLinear), input "
            "[batch, %lld, height, width]\n",
            out.c_str(), model_name.c_str(), static_cast<long long>(o.in_channels));
        return 0;
      }
      write_file_atomic(out, resnet_onnx_model(state, o));
      std::printf("%s: %s as ONNX (opset 17, %s), input [batch, %lld, height, width]\n",
                  out.c_str(), model_name.c_str(), o.fp16 ? "float16" : "float",
                  static_cast<long long>(o.in_channels));
      return 0;
    }
#endif
    nn::check_torch_layout_model(model_name);
    int64_t steps = 0;
    if (auto s = file.metadata.find("hourglass.optim.step"); s != file.metadata.end())
      steps = std::stoll(s->second);
    const std::vector<NamedTensor> torch = nn::to_torch_layout(model_name, state, steps);
    save_safetensors(out, torch,
                     {{"format", "pt"},
                      {"hourglass.source", args->model},
                      {"hourglass.model", model_name},
                      {"hourglass.layout", "torch (OIHW, torchvision names)"}});
    std::printf("%s: %zu tensors of %s in PyTorch's layout\n", out.c_str(), torch.size(),
                model_name.c_str());
    return 0;
  };
}

}  // namespace hg::cli
