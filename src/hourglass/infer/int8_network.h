// An inference graph quantised to INT8: every convolution and the classifier run as
// ops::conv2d_int8 (8-bit activations, s8 weights, int32 sums, the requantising epilogue with
// the residual add and ReLU fused), with symmetric per-output-channel weight scales and
// per-tensor activation scales (zero point 0): u8 for values that are never negative (a ReLU's
// outputs: all 8 bits for the magnitude), s8 for the others (the image, a shortcut's batch
// norm). Max pooling keeps its input's scale (it commutes with it); the global average pool runs
// in f32 and its output is quantised for the classifier.
//
// Saved as safetensors: per layer `<name>.weight` (s8), `<name>.weight_scale` (f32 [K]) and
// `<name>.bias` (f32 [K], in the output's real units); `activation_scales` (f64, one per value of
// the graph); the graph's structure as JSON in the metadata (kGraphMetadataKey).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hourglass/infer/inference_graph.h"
#include "hourglass/tensor/safetensors.h"

namespace hg::infer {

inline constexpr const char* kGraphMetadataKey = "hourglass.int8.graph";
inline constexpr const char* kFormatMetadataKey = "hourglass.format";
inline constexpr const char* kInt8Format = "int8";

class Int8Network {
 public:
  // `graph` (f32 weights, batch norm folded) with the calibrated threshold of each of its
  // values: a value that is never negative (a ReLU's output, and pools of those) is u8 with
  // scale threshold / 255, any other s8 with threshold / 127.
  static Int8Network quantize(const InferenceGraph& graph, const std::vector<double>& thresholds);
  // From a file's tensors and its graph metadata; throws InvalidInput naming `source` and what
  // is missing or malformed.
  static Int8Network load(const std::vector<NamedTensor>& tensors, const std::string& graph_json,
                          const std::string& source);

  // The logits (f32 [N, classes]) of `x` (f32 [N,H,W,C] on the network's device).
  Tensor run(const Tensor& x) const;

  Int8Network on(Device device) const;
  std::vector<NamedTensor> tensors() const;  // on the CPU
  std::string graph_json() const;
  const InferenceGraph& graph() const { return graph_; }
  const std::vector<double>& activation_scales() const { return scales_; }
  // Whether value `v` is u8 (never negative), else s8.
  bool value_is_unsigned(int v) const { return unsigned_.at(size_t(v)); }

 private:
  struct Layer {
    Tensor weight;        // s8 [K,R,S,C] (a linear layer's as [K,1,1,C])
    Tensor weight_scale;  // f32 [K]
    Tensor bias;          // f32 [K], real units
    Tensor multiplier;    // f32 [K]: input scale * weight scale / output scale
    Tensor bias_acc;      // f32 [K]: bias / (input scale * weight scale)
  };
  void derive(size_t node);  // multiplier and bias_acc of node `node` from the scales
  // Value `v` (f32 or already quantised) as its s8 or u8 form.
  Tensor quantized(const std::vector<Tensor>& values, int v) const;

  InferenceGraph graph_;  // structure only: weights and biases live in layers_
  std::vector<double> scales_;
  std::vector<bool> unsigned_;  // per value: u8 (true) or s8
  std::vector<Layer> layers_;   // one per node (empty for the pools)
};

}  // namespace hg::infer
