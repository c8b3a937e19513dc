#include "hourglass/infer/int8_network.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "hourglass/base/error.h"
#include "hourglass/ops/ops.h"

namespace hg::infer {

namespace {

bool has_weights(NodeKind kind) { return kind == NodeKind::Conv || kind == NodeKind::Linear; }

// Symmetric per-output-channel s8 weights: scale[k] = max |w[k]| / 127 (1 for an all-zero
// channel), w_q = round(w / scale), within [-127, 127].
void quantize_weights(const Tensor& w, Tensor& q, Tensor& scale) {
  const Tensor wf = w.to(Device::cpu()).to(DType::F32).contiguous();
  const int64_t k = wf.size(0), per = wf.numel() / k;
  Shape shape = wf.shape();
  if (shape.size() == 2) shape = {shape[0], 1, 1, shape[1]};
  q = Tensor::empty(shape, DType::I8);
  scale = Tensor::empty({k}, DType::F32);
  const float* src = wf.data<float>();
  int8_t* dst = q.data<int8_t>();
  for (int64_t o = 0; o < k; ++o) {
    double m = 0;
    for (int64_t i = 0; i < per; ++i) m = std::max(m, std::abs(double(src[o * per + i])));
    const float s = m > 0 ? float(m / 127.0) : 1.0f;
    scale.data<float>()[o] = s;
    for (int64_t i = 0; i < per; ++i)
      dst[o * per + i] =
          int8_t(std::clamp(std::nearbyint(double(src[o * per + i]) / double(s)), -127.0, 127.0));
  }
}

}  // namespace

void Int8Network::derive(size_t index) {
  const Node& n = graph_.nodes[index];
  Layer& l = layers_[index];
  const int64_t k = l.weight_scale.size(0);
  const double in = scales_[size_t(n.input)];
  // The classifier's output is f32 logits: its "scale" is 1.
  const double out = n.kind == NodeKind::Linear ? 1.0 : scales_[size_t(n.output)];
  l.multiplier = Tensor::empty({k}, DType::F32);
  l.bias_acc = Tensor::empty({k}, DType::F32);
  for (int64_t o = 0; o < k; ++o) {
    const double sw = double(l.weight_scale.data<float>()[o]);
    l.multiplier.data<float>()[o] = float(in * sw / out);
    l.bias_acc.data<float>()[o] = float(double(l.bias.data<float>()[o]) / (in * sw));
  }
}

Int8Network Int8Network::quantize(const InferenceGraph& graph,
                                  const std::vector<double>& thresholds) {
  HG_CHECK(int(thresholds.size()) == graph.num_values,
           "int8: {} thresholds for a graph of {} values", thresholds.size(), graph.num_values);
  Int8Network net;
  net.graph_ = graph;
  net.unsigned_ = nonnegative_values(net.graph_);
  net.scales_.resize(thresholds.size());
  for (size_t v = 0; v < thresholds.size(); ++v)
    net.scales_[v] = thresholds[v] / (net.unsigned_[v] ? 255.0 : 127.0);
  net.layers_.resize(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node& n = net.graph_.nodes[i];
    // Max pooling commutes with the scale: its output keeps its input's.
    if (n.kind == NodeKind::MaxPool) net.scales_[size_t(n.output)] = net.scales_[size_t(n.input)];
    if (!has_weights(n.kind)) continue;
    Layer& l = net.layers_[i];
    quantize_weights(n.weight, l.weight, l.weight_scale);
    l.bias = n.bias.to(Device::cpu()).to(DType::F32).contiguous();
    n.weight = Tensor();
    n.bias = Tensor();
  }
  for (double s : net.scales_)
    HG_CHECK(std::isfinite(s) && s > 0, "int8: activation scale {} is not positive", s);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (has_weights(graph.nodes[i].kind)) net.derive(i);
  return net;
}

Tensor Int8Network::quantized(const std::vector<Tensor>& values, int v) const {
  const Tensor& t = values[size_t(v)];
  if (t.dtype() == DType::I8 || t.dtype() == DType::U8) return t;
  return ops::quantize_int8(t, 1.0 / scales_[size_t(v)],
                            unsigned_[size_t(v)] ? DType::U8 : DType::I8);
}

Tensor Int8Network::run(const Tensor& x) const {
  const std::vector<int> last = last_readers(graph_);
  std::vector<Tensor> values(size_t(graph_.num_values));
  values[0] = x;
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const Node& n = graph_.nodes[i];
    const Layer& l = layers_[i];
    Tensor y;
    switch (n.kind) {
      case NodeKind::Conv: {
        Int8ConvParams p;
        p.conv = n.conv;
        p.relu = n.relu;
        Tensor residual;
        if (n.residual >= 0) {
          residual = quantized(values, n.residual);
          p.residual_multiplier = scales_[size_t(n.residual)] / scales_[size_t(n.output)];
        }
        y = ops::conv2d_int8(quantized(values, n.input), l.weight, l.multiplier, l.bias_acc,
                             residual, p);
        break;
      }
      case NodeKind::MaxPool:
        // Pooled in 8 bits: the output keeps the input's scale.
        y = ops::max_pool2d_int8(quantized(values, n.input), n.pool);
        break;
      case NodeKind::GlobalAvgPool:
        y = ops::global_avg_pool(
            ops::dequantize_int8(quantized(values, n.input), scales_[size_t(n.input)]));
        break;
      case NodeKind::Linear: {
        Int8ConvParams p;
        p.f32_output = true;
        const Tensor in = quantized(values, n.input);
        y = ops::conv2d_int8(in.view({in.size(0), 1, 1, in.size(1)}), l.weight, l.multiplier,
                             l.bias_acc, Tensor(), p)
                .view({in.size(0), l.weight.size(0)});
        break;
      }
    }
    values[size_t(n.output)] = std::move(y);
    for (int v : {n.input, n.residual})
      if (v >= 0 && last[size_t(v)] == int(i)) values[size_t(v)] = Tensor();
  }
  return values[size_t(graph_.output)];
}

Int8Network Int8Network::on(Device device) const {
  Int8Network net = *this;
  for (Layer& l : net.layers_)
    for (Tensor* t : {&l.weight, &l.weight_scale, &l.bias, &l.multiplier, &l.bias_acc})
      if (t->defined()) *t = t->to(device);
  return net;
}

std::vector<NamedTensor> Int8Network::tensors() const {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    if (!has_weights(graph_.nodes[i].kind)) continue;
    const std::string& name = graph_.nodes[i].name;
    const Layer& l = layers_[i];
    out.push_back({name + ".weight", l.weight.to(Device::cpu())});
    out.push_back({name + ".weight_scale", l.weight_scale.to(Device::cpu())});
    out.push_back({name + ".bias", l.bias.to(Device::cpu())});
  }
  out.push_back({"activation_scales", Tensor::from_vector(scales_, {int64_t(scales_.size())})});
  return out;
}

std::string Int8Network::graph_json() const {
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const Node& n : graph_.nodes) {
    nlohmann::ordered_json j = {{"kind", node_kind_name(n.kind)},
                                {"name", n.name},
                                {"input", n.input},
                                {"output", n.output}};
    if (n.kind == NodeKind::Conv) {
      j["residual"] = n.residual;
      j["relu"] = n.relu;
      j["stride"] = {n.conv.stride_h, n.conv.stride_w};
      j["pad"] = {n.conv.pad_h, n.conv.pad_w};
    }
    if (n.kind == NodeKind::MaxPool) {
      j["kernel"] = {n.pool.kernel_h, n.pool.kernel_w};
      j["stride"] = {n.pool.stride_h, n.pool.stride_w};
      j["pad"] = {n.pool.pad_h, n.pool.pad_w};
    }
    nodes.push_back(std::move(j));
  }
  const nlohmann::ordered_json g = {
      {"values", graph_.num_values}, {"output", graph_.output}, {"nodes", nodes}};
  return g.dump();
}

Int8Network Int8Network::load(const std::vector<NamedTensor>& tensors,
                              const std::string& graph_json, const std::string& source) {
  std::map<std::string, Tensor> by_name;
  for (const NamedTensor& t : tensors) by_name.emplace(t.name, t.tensor);
  auto tensor = [&](const std::string& name, DType dtype) {
    auto it = by_name.find(name);
    HG_CHECK(it != by_name.end(),
             "{}: no tensor '{}' (an INT8 model written by hourglass "
             "quantize has one)",
             source, name);
    HG_CHECK(it->second.dtype() == dtype, "{}: tensor '{}' is {}, expected {}", source, name,
             it->second.describe(), dtype_name(dtype));
    return it->second;
  };
  Int8Network net;
  try {
    const nlohmann::json g = nlohmann::json::parse(graph_json);
    net.graph_.num_values = g.at("values").get<int>();
    net.graph_.output = g.at("output").get<int>();
    for (const nlohmann::json& j : g.at("nodes")) {
      Node n;
      n.kind = node_kind_from_name(j.at("kind").get<std::string>());
      n.name = j.at("name").get<std::string>();
      n.input = j.at("input").get<int>();
      n.output = j.at("output").get<int>();
      if (n.kind == NodeKind::Conv) {
        n.residual = j.at("residual").get<int>();
        n.relu = j.at("relu").get<bool>();
        n.conv.stride_h = j.at("stride")[0], n.conv.stride_w = j.at("stride")[1];
        n.conv.pad_h = j.at("pad")[0], n.conv.pad_w = j.at("pad")[1];
      }
      if (n.kind == NodeKind::MaxPool) {
        n.pool.kernel_h = j.at("kernel")[0], n.pool.kernel_w = j.at("kernel")[1];
        n.pool.stride_h = j.at("stride")[0], n.pool.stride_w = j.at("stride")[1];
        n.pool.pad_h = j.at("pad")[0], n.pool.pad_w = j.at("pad")[1];
      }
      const int values = net.graph_.num_values;
      HG_CHECK(n.input >= 0 && n.input < values && n.output > 0 && n.output < values &&
                   n.residual >= -1 && n.residual < values,
               "{}: node '{}' names a value outside the graph's {}", source, n.name, values);
      net.graph_.nodes.push_back(std::move(n));
    }
  } catch (const nlohmann::json::exception& e) {
    throw_invalid(fmt::format("{}: metadata '{}' is not an INT8 graph: {}", source,
                              kGraphMetadataKey, e.what()),
                  "write the model again with hourglass quantize");
  }
  const Tensor scales = tensor("activation_scales", DType::F64);
  HG_CHECK(scales.numel() == net.graph_.num_values, "{}: {} activation scales for {} values",
           source, scales.numel(), net.graph_.num_values);
  net.scales_.assign(scales.data<double>(), scales.data<double>() + scales.numel());
  for (double s : net.scales_)
    HG_CHECK(std::isfinite(s) && s > 0, "{}: activation scale {} is not positive", source, s);
  net.unsigned_ = nonnegative_values(net.graph_);
  net.layers_.resize(net.graph_.nodes.size());
  for (size_t i = 0; i < net.graph_.nodes.size(); ++i) {
    const Node& n = net.graph_.nodes[i];
    if (!has_weights(n.kind)) continue;
    Layer& l = net.layers_[i];
    l.weight = tensor(n.name + ".weight", DType::I8);
    l.weight_scale = tensor(n.name + ".weight_scale", DType::F32);
    l.bias = tensor(n.name + ".bias", DType::F32);
    const int64_t k = l.weight.dim() == 4 ? l.weight.size(0) : -1;
    HG_CHECK(k > 0 && l.weight_scale.shape() == Shape{k} && l.bias.shape() == Shape{k},
             "{}: layer '{}' has weight {}, weight_scale {}, bias {}: expected [K,R,S,C], [K], [K]",
             source, n.name, l.weight.describe(), l.weight_scale.describe(), l.bias.describe());
    net.derive(i);
  }
  return net;
}

}  // namespace hg::infer
