// A trained ResNet as an ONNX model (opset 17), written through Debian's libonnx protobuf
// classes: `hourglass export --format onnx`.
//
// The graph takes "input", float (float16 with OnnxExportOptions::fp16) [batch, channels, height,
// width] (NCHW, any height and width, normalised as the run's data pipeline normalises), and gives
// "logits", float [batch, classes]: the stem's Conv, BatchNormalization, Relu (and MaxPool with the
// ImageNet stem), each residual block's Conv/BatchNormalization/Relu with its shortcut (a Conv and
// a BatchNormalization where the block downsamples) joined by Add and Relu, then GlobalAveragePool,
// Flatten and Gemm. Batch norms keep their running statistics (evaluation mode); convolution
// weights are OIHW.
#pragma once

#include <string>
#include <vector>

#include "hourglass/infer/int8_network.h"
#include "hourglass/tensor/safetensors.h"

namespace hg::cli {

struct OnnxExportOptions {
  std::string model_name;  // resnet18, resnet34 or resnet50
  std::string stem;        // "cifar" or "imagenet"
  int64_t in_channels = 3;
  std::string producer_version;
  // resnet_onnx_model: every tensor float16, the input and logits too (else float).
  bool fp16 = false;
};

// The model's state (hourglass's names and layout) as a serialised ONNX ModelProto. Throws
// InvalidInput naming a model without an ONNX graph here or a tensor the graph needs that is
// missing.
std::string resnet_onnx_model(const std::vector<NamedTensor>& state,
                              const OnnxExportOptions& options);

// An INT8 model (hourglass quantize's) as an ONNX model in QDQ form (opset 17): each activation
// a QuantizeLinear/DequantizeLinear pair with its scale (zero point 0; uint8 for the values a ReLU
// produced, int8 for the others), each weight int8 with per-output-channel scales behind a
// DequantizeLinear (axis 0), then the float operators between them (Conv with its folded bias,
// Add, Relu, MaxPool, GlobalAveragePool, Flatten, Gemm): what ONNX Runtime fuses into its integer
// kernels. Same input and output as resnet_onnx_model.
std::string int8_onnx_model(const infer::Int8Network& net, const OnnxExportOptions& options);

}  // namespace hg::cli
