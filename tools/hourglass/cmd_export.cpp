// hourglass export MODEL --format torch [--out PATH] [--allow-unverified-checkpoint]
//
// A trained model's weights in PyTorch's layout under torchvision's names
// (nn/torch_layout.h): safetensors that torchvision.models.resnet50().load_state_dict takes
// (via safetensors.torch.load_file), with the ImageNet stem. Writes <MODEL's stem>.torch
// .safetensors beside MODEL unless --out names the file; an existing file is never replaced.
#include <filesystem>

#include "commands.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/nn/torch_layout.h"
#include "hourglass/tensor/safetensors.h"
#include "hourglass/train/config/run_config.h"
#include "hourglass/train/run/checkpoint.h"

namespace hg::cli {

Runner add_export(CLI::App& app) {
  struct Args {
    std::string model;
    std::string format;
    std::string out;
    bool allow_unverified = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "export",
      "Write a trained model's weights for another framework: --format torch, PyTorch's "
      "layout under torchvision's names (resnet18/34/50, mlp), without the optimizer state.");
  sub->add_option("model", args->model, "final.safetensors or a checkpoint of a run")->required();
  sub->add_option("--format", args->format, "torch")->required();
  sub->add_option("--out", args->out,
                  "the file to write (default: MODEL's name with .torch.safetensors); an "
                  "existing file is refused");
  sub->add_flag("--allow-unverified-checkpoint", args->allow_unverified,
                "also read a checkpoint written before checkpoint-v3 (no whole-file checksum)");
  return [args] {
    HG_CHECK(args->format == "torch",
             "--format {}: the formats export writes are: torch (ONNX is not written yet)",
             args->format);
    const SafetensorsFile file = train::read_checkpoint(
        args->model, args->allow_unverified ? train::CheckpointTrust::AllowUnverified
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
    nn::check_torch_layout_model(model_name);
    std::vector<NamedTensor> state;
    for (const NamedTensor& t : file.tensors)
      if (t.name.rfind(train::kOptimPrefix, 0) != 0) state.push_back(t);
    int64_t steps = 0;
    if (auto s = file.metadata.find("hourglass.optim.step"); s != file.metadata.end())
      steps = std::stoll(s->second);
    const std::vector<NamedTensor> torch = nn::to_torch_layout(model_name, state, steps);
    std::string out = args->out;
    if (out.empty()) {
      std::filesystem::path p(args->model);
      out = (p.parent_path() / (p.stem().string() + ".torch.safetensors")).string();
    }
    HG_CHECK(!std::filesystem::exists(out),
             "export: {} exists already; it is left as it is (pass --out to write elsewhere)", out);
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
