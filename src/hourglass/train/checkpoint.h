// Model checkpoints: the model's parameters and buffers under their own names (so any
// safetensors reader sees "layer1.0.conv1.weight"), optimizer state under "optim.<name>", and
// the resolved config plus run position in the metadata.
#pragma once

#include <map>
#include <string>

#include "hourglass/nn/module.h"
#include "hourglass/optim/optimizer.h"
#include "hourglass/tensor/safetensors.h"

namespace hg::train {

inline constexpr const char* kConfigMetadataKey = "hourglass.config";   // resolved TOML
inline constexpr const char* kFormatMetadataKey = "hourglass.format";   // "checkpoint-v1"
inline constexpr const char* kOptimPrefix = "optim.";

// Writes atomically (see save_safetensors). `optimizer` may be null (weights only).
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, std::map<std::string, std::string> metadata);

// Copies the model's tensors from `file` into `model`; errors name the file and the tensor.
void load_model_state(nn::Module& model, const SafetensorsFile& file);

}  // namespace hg::train
