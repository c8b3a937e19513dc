#include "onnx_export.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <map>

#include "hourglass/base/error.h"

namespace hg::cli {

namespace {

constexpr int64_t kOpset = 17;
constexpr float kBatchNormEps = 1e-5f;  // nn::BatchNorm2d's

class GraphBuilder {
 public:
  // `fp16`: the state's tensors are written as float16 (else float).
  GraphBuilder(onnx::GraphProto& graph, const std::map<std::string, Tensor>& state,
               bool fp16 = false)
      : graph_(graph), state_(state), fp16_(fp16) {}

  // The tensor `name` of the state as an initializer (4-D weights turned OIHW); its name.
  std::string initializer(const std::string& name) {
    auto it = state_.find(name);
    HG_CHECK(it != state_.end(), "export --format onnx: the model has no tensor '{}'", name);
    // Rounded once, from f32 (f16 from f64 would round twice).
    Tensor t = it->second.to(Device::cpu()).to(DType::F32);
    if (fp16_) t = t.to(DType::F16);
    if (t.dim() == 4) t = t.permute({0, 3, 1, 2});
    t = t.contiguous();
    onnx::TensorProto* p = graph_.add_initializer();
    p->set_name(name);
    p->set_data_type(fp16_ ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT);
    for (int64_t d : t.shape()) p->add_dims(d);
    p->set_raw_data(std::string(static_cast<const char*>(t.data_ptr()), size_t(t.nbytes())));
    return name;
  }

  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<onnx::AttributeProto>& attributes = {}) {
    onnx::NodeProto* n = graph_.add_node();
    n->set_op_type(op);
    n->set_name(fmt::format("{}_{}", op, ++count_));
    for (const std::string& in : inputs) n->add_input(in);
    const std::string out = fmt::format("t{}", count_);
    n->add_output(out);
    for (const onnx::AttributeProto& a : attributes) *n->add_attribute() = a;
    return out;
  }

  // Conv over `x` with the weight `prefix`.weight, stride `stride`, padding kernel / 2.
  std::string conv(const std::string& x, const std::string& prefix, int64_t stride) {
    const std::string w = initializer(prefix + ".weight");
    const int64_t k = state_.at(prefix + ".weight").size(1);  // [O, KH, KW, I]
    const int64_t pad = k / 2;
    return node("Conv", {x, w},
                {ints("kernel_shape", {k, k}), ints("strides", {stride, stride}),
                 ints("pads", {pad, pad, pad, pad}), ints("dilations", {1, 1})});
  }

  std::string batch_norm(const std::string& x, const std::string& prefix) {
    return node("BatchNormalization",
                {x, initializer(prefix + ".weight"), initializer(prefix + ".bias"),
                 initializer(prefix + ".running_mean"), initializer(prefix + ".running_var")},
                {real("epsilon", kBatchNormEps)});
  }

  std::string relu(const std::string& x) { return node("Relu", {x}); }

  // `t` (CPU) as an initializer named `name`: f32, f64 (stored as f32), i8 or u8.
  std::string constant(const std::string& name, const Tensor& t) {
    onnx::TensorProto* p = graph_.add_initializer();
    p->set_name(name);
    Tensor c = t.to(Device::cpu());
    if (c.dtype() == DType::F64) c = c.to(DType::F32);
    c = c.contiguous();
    p->set_data_type(c.dtype() == DType::I8   ? onnx::TensorProto::INT8
                     : c.dtype() == DType::U8 ? onnx::TensorProto::UINT8
                                              : onnx::TensorProto::FLOAT);
    for (int64_t d : c.shape()) p->add_dims(d);
    p->set_raw_data(std::string(static_cast<const char*>(c.data_ptr()), size_t(c.nbytes())));
    return name;
  }

  bool has(const std::string& name) const { return state_.count(name) > 0; }

  static onnx::AttributeProto ints(const std::string& name, const std::vector<int64_t>& values) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a.add_ints(v);
    return a;
  }
  static onnx::AttributeProto integer(const std::string& name, int64_t value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(value);
    return a;
  }
  static onnx::AttributeProto real(const std::string& name, float value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(value);
    return a;
  }

 private:
  onnx::GraphProto& graph_;
  const std::map<std::string, Tensor>& state_;
  bool fp16_ = false;
  int count_ = 0;
};

void input_value(onnx::ValueInfoProto* v, int64_t channels, bool fp16 = false) {
  v->set_name("input");
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(fp16 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  shape->add_dim()->set_dim_value(channels);
  shape->add_dim()->set_dim_param("height");
  shape->add_dim()->set_dim_param("width");
}

// The graph's "logits" output, float (or float16) [batch, classes], made the last node's output.
void logits_output(onnx::GraphProto& graph, int64_t classes, bool fp16 = false) {
  graph.mutable_node(graph.node_size() - 1)->set_output(0, "logits");
  onnx::ValueInfoProto* out = graph.add_output();
  out->set_name("logits");
  onnx::TypeProto_Tensor* t = out->mutable_type()->mutable_tensor_type();
  t->set_elem_type(fp16 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  t->mutable_shape()->add_dim()->set_dim_value(classes);
}

onnx::ModelProto new_model(const OnnxExportOptions& o) {
  onnx::ModelProto model;
  model.set_ir_version(onnx::IR_VERSION);
  model.set_producer_name("hourglass");
  model.set_producer_version(o.producer_version);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  model.mutable_graph()->set_name(o.model_name);
  return model;
}

std::string serialised(const onnx::ModelProto& model) {
  std::string bytes;
  HG_CHECK(model.SerializeToString(&bytes), "export --format onnx: the model did not serialise");
  return bytes;
}

}  // namespace

std::string resnet_onnx_model(const std::vector<NamedTensor>& tensors, const OnnxExportOptions& o) {
  HG_CHECK(o.model_name == "resnet18" || o.model_name == "resnet34" || o.model_name == "resnet50",
           "export --format onnx: model '{}' has no ONNX graph here: resnet18, resnet34 and "
           "resnet50 do",
           o.model_name);
  std::map<std::string, Tensor> state;
  for (const NamedTensor& t : tensors) state.emplace(t.name, t.tensor);

  onnx::ModelProto model = new_model(o);
  onnx::GraphProto& graph = *model.mutable_graph();
  GraphBuilder g(graph, state, o.fp16);
  // Any image size: the ResNets end in a global average pool.
  input_value(graph.add_input(), o.in_channels, o.fp16);

  const bool imagenet = o.stem == "imagenet";
  std::string y = g.relu(g.batch_norm(g.conv("input", "stem.conv", imagenet ? 2 : 1), "stem.bn"));
  if (imagenet)
    y = g.node("MaxPool", {y},
               {GraphBuilder::ints("kernel_shape", {3, 3}), GraphBuilder::ints("strides", {2, 2}),
                GraphBuilder::ints("pads", {1, 1, 1, 1})});
  for (int s = 1; g.has(fmt::format("layer{}.0.conv1.weight", s)); ++s) {
    for (int b = 0; g.has(fmt::format("layer{}.{}.conv1.weight", s, b)); ++b) {
      const std::string p = fmt::format("layer{}.{}", s, b);
      const int64_t stride = s > 1 && b == 0 ? 2 : 1;
      const bool bottleneck = g.has(p + ".conv3.weight");
      // Basic: the stride on conv1; Bottleneck: on conv2 (nn/resnet.cpp).
      std::string z =
          g.relu(g.batch_norm(g.conv(y, p + ".conv1", bottleneck ? 1 : stride), p + ".bn1"));
      z = g.batch_norm(g.conv(z, p + ".conv2", bottleneck ? stride : 1), p + ".bn2");
      if (bottleneck) z = g.batch_norm(g.conv(g.relu(z), p + ".conv3", 1), p + ".bn3");
      const std::string shortcut =
          g.has(p + ".shortcut.conv.weight")
              ? g.batch_norm(g.conv(y, p + ".shortcut.conv", stride), p + ".shortcut.bn")
              : y;
      y = g.relu(g.node("Add", {z, shortcut}));
    }
  }
  y = g.node("Flatten", {g.node("GlobalAveragePool", {y})}, {GraphBuilder::integer("axis", 1)});
  g.node("Gemm", {y, g.initializer("fc.weight"), g.initializer("fc.bias")},
         {GraphBuilder::integer("transB", 1)});
  logits_output(graph, state.at("fc.weight").size(0), o.fp16);
  return serialised(model);
}

std::string int8_onnx_model(const infer::Int8Network& net, const OnnxExportOptions& o) {
  onnx::ModelProto model = new_model(o);
  onnx::GraphProto& graph = *model.mutable_graph();
  const std::map<std::string, Tensor> none;
  GraphBuilder g(graph, none);
  input_value(graph.add_input(), o.in_channels);
  const infer::InferenceGraph& ig = net.graph();
  const std::vector<double>& scales = net.activation_scales();
  std::map<std::string, Tensor> layer;
  for (const NamedTensor& t : net.tensors()) layer.emplace(t.name, t.tensor);

  // Value v's float name after its QuantizeLinear/DequantizeLinear pair.
  std::vector<std::string> dq(size_t(ig.num_values));
  auto quantise = [&](int v, const std::string& x) {
    const std::string scale =
        g.constant(fmt::format("v{}.scale", v), Tensor::scalar(scales[size_t(v)], DType::F32));
    const std::string zero =
        g.constant(fmt::format("v{}.zero_point", v),
                   Tensor::zeros({}, net.value_is_unsigned(v) ? DType::U8 : DType::I8));
    dq[size_t(v)] =
        g.node("DequantizeLinear", {g.node("QuantizeLinear", {x, scale, zero}), scale, zero});
  };
  // A layer's int8 weights behind a per-output-channel DequantizeLinear; `oihw` for a
  // convolution's (KRSC in the file), else [K, C].
  auto weights = [&](const std::string& name, bool oihw) {
    Tensor w = layer.at(name + ".weight");
    w = oihw ? w.permute({0, 3, 1, 2}).contiguous() : w.view({w.size(0), w.size(3)});
    const int64_t k = w.size(0);
    return g.node("DequantizeLinear",
                  {g.constant(name + ".weight", w),
                   g.constant(name + ".weight_scale", layer.at(name + ".weight_scale")),
                   g.constant(name + ".weight_zero_point", Tensor::zeros({k}, DType::I8))},
                  {GraphBuilder::integer("axis", 0)});
  };
  quantise(0, "input");
  for (const infer::Node& n : ig.nodes) {
    const std::string& in = dq[size_t(n.input)];
    switch (n.kind) {
      case infer::NodeKind::Conv: {
        const Tensor& w = layer.at(n.name + ".weight");  // [K,R,S,C]
        std::string y = g.node(
            "Conv",
            {in, weights(n.name, true), g.constant(n.name + ".bias", layer.at(n.name + ".bias"))},
            {GraphBuilder::ints("kernel_shape", {w.size(1), w.size(2)}),
             GraphBuilder::ints("strides", {n.conv.stride_h, n.conv.stride_w}),
             GraphBuilder::ints("pads", {n.conv.pad_h, n.conv.pad_w, n.conv.pad_h, n.conv.pad_w}),
             GraphBuilder::ints("dilations", {1, 1})});
        if (n.residual >= 0) y = g.node("Add", {y, dq[size_t(n.residual)]});
        if (n.relu) y = g.relu(y);
        quantise(n.output, y);
        break;
      }
      case infer::NodeKind::MaxPool:
        // The same scale: max pooling of the dequantised values is already on its grid.
        dq[size_t(n.output)] = g.node(
            "MaxPool", {in},
            {GraphBuilder::ints("kernel_shape", {n.pool.kernel_h, n.pool.kernel_w}),
             GraphBuilder::ints("strides", {n.pool.stride_h, n.pool.stride_w}),
             GraphBuilder::ints("pads", {n.pool.pad_h, n.pool.pad_w, n.pool.pad_h, n.pool.pad_w})});
        break;
      case infer::NodeKind::GlobalAvgPool:
        quantise(n.output, g.node("Flatten", {g.node("GlobalAveragePool", {in})},
                                  {GraphBuilder::integer("axis", 1)}));
        break;
      case infer::NodeKind::Linear:
        g.node(
            "Gemm",
            {in, weights(n.name, false), g.constant(n.name + ".bias", layer.at(n.name + ".bias"))},
            {GraphBuilder::integer("transB", 1)});
        logits_output(graph, layer.at(n.name + ".bias").size(0));
        break;
    }
  }
  return serialised(model);
}

}  // namespace hg::cli
