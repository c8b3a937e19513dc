// A trained ResNet as an ONNX model (opset 17), written through Debian's libonnx protobuf
// classes: `hourglass export --format onnx`.
//
// The graph takes "input", float [batch, channels, height, width] (NCHW, any height and width,
// normalised as the run's data pipeline normalises), and gives "logits", float [batch, classes]:
// the stem's Conv, BatchNormalization, Relu (and MaxPool with the ImageNet stem), each residual
// block's Conv/BatchNormalization/Relu with its shortcut (a Conv and a BatchNormalization where the
// block downsamples) joined by Add and Relu, then GlobalAveragePool, Flatten and Gemm. Batch norms
// keep their running statistics (evaluation mode); convolution weights are OIHW.
#pragma once

#include <string>
#include <vector>

#include "hourglass/tensor/safetensors.h"

namespace hg::cli {

struct OnnxExportOptions {
  std::string model_name;  // resnet18, resnet34 or resnet50
  std::string stem;        // "cifar" or "imagenet"
  int64_t in_channels = 3;
  std::string producer_version;
};

// The model's state (hourglass's names and layout) as a serialised ONNX ModelProto. Throws
// InvalidInput naming a model without an ONNX graph here or a tensor the graph needs that is
// missing.
std::string resnet_onnx_model(const std::vector<NamedTensor>& state,
                              const OnnxExportOptions& options);

}  // namespace hg::cli
