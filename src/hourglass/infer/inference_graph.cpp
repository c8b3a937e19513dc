#include "hourglass/infer/inference_graph.h"

#include <fmt/format.h>

#include <cmath>

#include "hourglass/base/error.h"
#include "hourglass/ops/ops.h"

namespace hg::infer {

std::string node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Conv: return "conv";
    case NodeKind::MaxPool: return "max_pool";
    case NodeKind::GlobalAvgPool: return "global_avg_pool";
    case NodeKind::Linear: return "linear";
  }
  return "?";
}

NodeKind node_kind_from_name(const std::string& name) {
  for (NodeKind k : {NodeKind::Conv, NodeKind::MaxPool, NodeKind::GlobalAvgPool, NodeKind::Linear})
    if (node_kind_name(k) == name) return k;
  throw_invalid(fmt::format("unknown inference node kind '{}'", name),
                "the kinds are conv, max_pool, global_avg_pool and linear");
}

namespace {

class ResNetFolder {
 public:
  ResNetFolder(const std::map<std::string, Tensor>& state, double eps) : state_(state), eps_(eps) {}

  bool has(const std::string& name) const { return state_.count(name) > 0; }

  // The convolution `conv` followed by the batch norm `bn`, folded: a Conv node reading `input`.
  int conv_bn(const std::string& conv, const std::string& bn, int input, int64_t stride, bool relu,
              int residual = -1) {
    const Tensor w = get(conv + ".weight");  // [K,R,S,C]
    const Tensor gamma = get(bn + ".weight"), beta = get(bn + ".bias");
    const Tensor mean = get(bn + ".running_mean"), var = get(bn + ".running_var");
    const int64_t k = w.size(0), per = w.numel() / k;
    Node n;
    n.kind = NodeKind::Conv;
    n.name = conv;
    n.input = input;
    n.residual = residual;
    n.relu = relu;
    n.conv.stride_h = n.conv.stride_w = stride;
    n.conv.pad_h = w.size(1) / 2;
    n.conv.pad_w = w.size(2) / 2;
    n.weight = Tensor::empty(w.shape(), DType::F32);
    n.bias = Tensor::empty({k}, DType::F32);
    const float* src = w.data<float>();
    float* dst = n.weight.data<float>();
    for (int64_t o = 0; o < k; ++o) {
      const double a =
          double(gamma.data<float>()[o]) / std::sqrt(double(var.data<float>()[o]) + eps_);
      for (int64_t i = 0; i < per; ++i) dst[o * per + i] = float(double(src[o * per + i]) * a);
      n.bias.data<float>()[o] =
          float(double(beta.data<float>()[o]) - double(mean.data<float>()[o]) * a);
    }
    return add(std::move(n));
  }

  int add(Node n) {
    n.output = graph.num_values++;
    graph.nodes.push_back(std::move(n));
    return graph.nodes.back().output;
  }

  // f32 on the CPU.
  Tensor get(const std::string& name) const {
    auto it = state_.find(name);
    HG_CHECK(it != state_.end(), "inference graph: the model has no tensor '{}'", name);
    return it->second.to(Device::cpu()).to(DType::F32).contiguous();
  }

  InferenceGraph graph;

 private:
  const std::map<std::string, Tensor>& state_;
  double eps_;
};

}  // namespace

InferenceGraph resnet_inference_graph(const std::map<std::string, Tensor>& state,
                                      const std::string& stem, double batch_norm_eps) {
  HG_CHECK(stem == "cifar" || stem == "imagenet",
           "inference graph: stem '{}' is neither cifar nor imagenet", stem);
  ResNetFolder f(state, batch_norm_eps);
  HG_CHECK(f.has("stem.conv.weight") && f.has("fc.weight"),
           "inference graph: not a ResNet's weights (no stem.conv.weight or fc.weight)");
  const bool imagenet = stem == "imagenet";
  int y = f.conv_bn("stem.conv", "stem.bn", 0, imagenet ? 2 : 1, true);
  if (imagenet) {
    Node pool;
    pool.kind = NodeKind::MaxPool;
    pool.name = "stem.pool";
    pool.input = y;
    pool.pool = Pool2dParams{3, 3, 2, 2, 1, 1};
    y = f.add(std::move(pool));
  }
  for (int s = 1; f.has(fmt::format("layer{}.0.conv1.weight", s)); ++s) {
    for (int b = 0; f.has(fmt::format("layer{}.{}.conv1.weight", s, b)); ++b) {
      const std::string p = fmt::format("layer{}.{}", s, b);
      const int64_t stride = s > 1 && b == 0 ? 2 : 1;
      const bool bottleneck = f.has(p + ".conv3.weight");
      // Basic: the stride on conv1; Bottleneck: on conv2 (nn/resnet.cpp).
      int z = f.conv_bn(p + ".conv1", p + ".bn1", y, bottleneck ? 1 : stride, true);
      const int shortcut =
          f.has(p + ".shortcut.conv.weight")
              ? f.conv_bn(p + ".shortcut.conv", p + ".shortcut.bn", y, stride, false)
              : y;
      if (bottleneck) {
        z = f.conv_bn(p + ".conv2", p + ".bn2", z, stride, true);
        y = f.conv_bn(p + ".conv3", p + ".bn3", z, 1, true, shortcut);
      } else {
        y = f.conv_bn(p + ".conv2", p + ".bn2", z, 1, true, shortcut);
      }
    }
  }
  Node gap;
  gap.kind = NodeKind::GlobalAvgPool;
  gap.name = "pool";
  gap.input = y;
  y = f.add(std::move(gap));
  Node fc;
  fc.kind = NodeKind::Linear;
  fc.name = "fc";
  fc.input = y;
  fc.weight = f.get("fc.weight");
  fc.bias = f.get("fc.bias");
  f.graph.output = f.add(std::move(fc));
  return std::move(f.graph);
}

std::vector<bool> nonnegative_values(const InferenceGraph& graph) {
  std::vector<bool> out(size_t(graph.num_values), false);
  for (const Node& n : graph.nodes) {
    if (n.kind == NodeKind::Conv) out[size_t(n.output)] = n.relu;
    if (n.kind == NodeKind::MaxPool || n.kind == NodeKind::GlobalAvgPool)
      out[size_t(n.output)] = out[size_t(n.input)];
  }
  return out;
}

std::vector<int> last_readers(const InferenceGraph& graph) {
  std::vector<int> last(size_t(graph.num_values), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    last[size_t(graph.nodes[i].input)] = int(i);
    if (graph.nodes[i].residual >= 0) last[size_t(graph.nodes[i].residual)] = int(i);
  }
  last[size_t(graph.output)] = int(graph.nodes.size());
  return last;
}

InferenceGraph graph_on(const InferenceGraph& graph, Device device) {
  InferenceGraph g = graph;
  for (Node& n : g.nodes) {
    if (n.weight.defined()) n.weight = n.weight.to(device);
    if (n.bias.defined()) n.bias = n.bias.to(device);
  }
  return g;
}

Tensor run_float(const InferenceGraph& graph, const Tensor& x, const ValueObserver& observer) {
  const std::vector<int> last = last_readers(graph);
  std::vector<Tensor> values(size_t(graph.num_values));
  values[0] = x;
  if (observer) observer(0, x);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    const Tensor& in = values[size_t(n.input)];
    Tensor y;
    switch (n.kind) {
      case NodeKind::Conv:
        y = ops::conv2d(in, n.weight, n.bias, n.conv);
        if (n.residual >= 0) y = ops::add(y, values[size_t(n.residual)]);
        if (n.relu) y = ops::relu(y);
        break;
      case NodeKind::MaxPool: y = ops::max_pool2d(in, n.pool).y; break;
      case NodeKind::GlobalAvgPool: y = ops::global_avg_pool(in); break;
      case NodeKind::Linear: y = ops::linear(in, n.weight, n.bias); break;
    }
    if (observer) observer(n.output, y);
    values[size_t(n.output)] = std::move(y);
    for (int v : {n.input, n.residual})
      if (v >= 0 && last[size_t(v)] == int(i)) values[size_t(v)] = Tensor();
  }
  return values[size_t(graph.output)];
}

}  // namespace hg::infer
