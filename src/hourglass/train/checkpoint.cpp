#include "hourglass/train/checkpoint.h"

namespace hg::train {

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, std::map<std::string, std::string> metadata) {
  std::vector<NamedTensor> tensors;
  for (auto& [name, t] : model.state_dict()) tensors.push_back({name, t});
  if (optimizer) {
    for (auto& [name, t] : optimizer->state()) tensors.push_back({kOptimPrefix + name, t});
    metadata["hourglass.optim.name"] = optimizer->name();
    metadata["hourglass.optim.step"] = std::to_string(optimizer->step_count());
  }
  metadata[kFormatMetadataKey] = "checkpoint-v1";
  save_safetensors(path, tensors, metadata);
}

void load_model_state(nn::Module& model, const SafetensorsFile& file) {
  std::map<std::string, Tensor> state;
  for (const auto& t : file.tensors)
    if (t.name.rfind(kOptimPrefix, 0) != 0) state.emplace(t.name, t.tensor);
  model.load_state_dict(state, file.path);
}

}  // namespace hg::train
