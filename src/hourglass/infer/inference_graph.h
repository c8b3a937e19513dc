// A trained network as an inference graph: a list of nodes over numbered values, batch norm
// folded into the convolution before it, and the residual add and ReLU attached to the
// convolution they follow. It is what the INT8 path quantises (int8_network.h) and what runs a
// model's floating-point inference without autograd (run_float).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hourglass/ops/params.h"
#include "hourglass/tensor/tensor.h"

namespace hg::infer {

enum class NodeKind : uint8_t {
  Conv,           // y = conv(x) + bias (+ residual) (then ReLU); weight [K,R,S,C]
  MaxPool,        // y = max_pool2d(x)
  GlobalAvgPool,  // [N,H,W,C] -> [N,C]
  Linear,         // y = x w^T + bias; weight [K,C]
};

std::string node_kind_name(NodeKind kind);
// Throws InvalidInput naming `name` when it is none of node_kind_name's.
NodeKind node_kind_from_name(const std::string& name);

struct Node {
  NodeKind kind = NodeKind::Conv;
  std::string name;   // the layer's name in the model ("stem.conv", "layer1.0.conv2", "fc")
  int input = 0;      // value ids; value 0 is the graph's input
  int residual = -1;  // Conv: a value of the output's shape added before the ReLU, or -1
  int output = 0;
  bool relu = false;  // Conv
  Conv2dParams conv;  // Conv
  Pool2dParams pool;  // MaxPool
  Tensor weight;      // Conv, Linear: f32
  Tensor bias;        // Conv, Linear: f32 [K]
};

struct InferenceGraph {
  std::vector<Node> nodes;  // in the order they run; each reads values written before it
  int num_values = 1;       // value 0 is the input
  int output = 0;           // the value holding the logits
};

// A ResNet's state dict (hourglass's names and layout: nn/resnet.h) as an inference graph,
// each batch norm folded into the convolution before it in double (w' = w * g / sqrt(v + eps),
// b' = beta - mean * g / sqrt(v + eps)), rounded to f32 once. `stem` is "cifar" or "imagenet".
// Throws InvalidInput naming a tensor the graph needs that the state lacks.
InferenceGraph resnet_inference_graph(const std::map<std::string, Tensor>& state,
                                      const std::string& stem, double batch_norm_eps = 1e-5);

// Called with each value the graph computes (its id and the f32 tensor), the input included.
using ValueObserver = std::function<void(int value, const Tensor& tensor)>;

// The logits of `x` ([N,H,W,C] f32 on the device of the graph's weights), computed in f32
// with the ops of the float path; a value is released after its last reader.
Tensor run_float(const InferenceGraph& graph, const Tensor& x, const ValueObserver& observer = {});

// The graph with its weights on `device`.
InferenceGraph graph_on(const InferenceGraph& graph, Device device);

// For each value, whether it is never negative: a ReLU's output, and pools of such values (the
// INT8 network stores these as u8).
std::vector<bool> nonnegative_values(const InferenceGraph& graph);

// For each value, the index of the last node that reads it (-1 when none does; the output
// counts as read by a node past the end).
std::vector<int> last_readers(const InferenceGraph& graph);

}  // namespace hg::infer
