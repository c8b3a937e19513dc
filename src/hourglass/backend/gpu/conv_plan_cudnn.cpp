// conv_plan_cudnn.h: a convolution's descriptors, graphs, engine configurations, execution
// plans and variant packs in cuDNN's graph API.
#include "hourglass/backend/gpu/conv_plan_cudnn.h"

#include <algorithm>
#include <array>
#include <unordered_set>

#include "hourglass/backend/gpu/tuning_cudnn.h"
#include "hourglass/device/gpu/runtime.h"

namespace hg::gpu::cudnn_conv {

namespace {

using cudnn::take_last_error;

// The tensors' ids in the graphs and variant packs: x (dx), w (dw), y (dy).
constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3;

cudnnDataType_t cudnn_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    case DType::F16: return CUDNN_DATA_HALF;
    default: unsupported_dtype("conv2d", dtype);
  }
}

// A finalized tensor of logical dimensions [n, c, h, w] stored channels-last (NHWC
// activations; KRSC weights as [K, C/groups, R, S]) or channels-first (NCHW; KCRS).
Descriptor tensor_4d(int64_t uid, cudnnDataType_t type, int64_t n, int64_t c, int64_t h, int64_t w,
                     Layout layout, int64_t alignment, const CallContext& ctx) {
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, ctx);
  const int64_t dims[4] = {n, c, h, w};
  int64_t strides[4] = {h * w * c, 1, w * c, c};
  if (layout == kChannelsFirst) {
    strides[1] = h * w;
    strides[2] = w;
    strides[3] = 1;
  }
  HG_CUDNN_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, ctx);
  HG_CUDNN_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, ctx);
  HG_CUDNN_SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, ctx);
  HG_CUDNN_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, ctx);
  HG_CUDNN_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, ctx);
  HG_CUDNN_CHECK_FOR(cudnnBackendFinalize(t.get()), ctx);
  return t;
}

// Cross-correlation with f32 accumulation; padding symmetric as in Conv2dParams. Groups follow
// from the tensors (x's channels over the weights' channels).
Descriptor convolution(const Conv2dParams& p, const CallContext& ctx) {
  Descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, ctx);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  const int64_t dilation[2] = {p.dilation_h, p.dilation_w};
  const int64_t stride[2] = {p.stride_h, p.stride_w};
  const int64_t padding[2] = {p.pad_h, p.pad_w};
  HG_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, ctx);
  HG_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, ctx);
  HG_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, ctx);
  HG_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation, ctx);
  HG_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride, ctx);
  HG_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding, ctx);
  HG_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding, ctx);
  HG_CUDNN_CHECK_FOR(cudnnBackendFinalize(conv.get()), ctx);
  return conv;
}

}  // namespace

// ---- descriptors and graphs

void init_descriptors(ConvPlan& plan) {
  const ConvGeometry& g = plan.geometry;
  const CallContext ctx = plan.context();
  const cudnnDataType_t type = cudnn_dtype(plan.dtype);
  for (const Layout layout : {kChannelsLast, kChannelsFirst}) {
    if (!plan.searched[layout]) continue;
    ConvPlan::Operands& o = plan.operands[layout];
    o.x = tensor_4d(kUidX, type, g.n, g.c, g.h, g.w, layout, plan.alignment, ctx);
    o.y = tensor_4d(kUidY, type, g.n, g.k, g.p, g.q, layout, plan.alignment, ctx);
    o.w = tensor_4d(kUidW, type, g.k, g.c / g.params.groups, g.r, g.s, layout, plan.alignment, ctx);
  }
  plan.conv = convolution(g.params, ctx);
}

void init_graph(const ConvPlan& plan, Pass pass, Layout layout, PassPlan& pp,
                cudnnHandle_t handle) {
  const CallContext ctx = plan.context();
  const float alpha = 1.0f, beta = 0.0f;
  const ConvPlan::Operands& o = plan.operands[layout];
  cudnnBackendDescriptor_t x = o.x.get(), w = o.w.get(), y = o.y.get(), conv = plan.conv.get();
  constexpr auto kDesc = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  switch (pass) {
    case kForward: {
      Descriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, kDesc, 1, &x, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, kDesc, 1, &w, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, kDesc, 1, &y, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, kDesc, 1, &conv, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha,
                   ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta,
                   ctx);
      pp.operation[layout] = std::move(op);
      break;
    }
    case kBackwardData: {
      Descriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, kDesc, 1, &x, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, kDesc, 1, &w, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, kDesc, 1, &y, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, kDesc, 1, &conv, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha,
                   ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta,
                   ctx);
      pp.operation[layout] = std::move(op);
      break;
    }
    default: {
      Descriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, kDesc, 1, &x, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, kDesc, 1, &w, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, kDesc, 1, &y, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, kDesc, 1, &conv, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1,
                   &alpha, ctx);
      HG_CUDNN_SET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta,
                   ctx);
      pp.operation[layout] = std::move(op);
      break;
    }
  }
  HG_CUDNN_CHECK_FOR(cudnnBackendFinalize(pp.operation[layout].get()), ctx);
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, ctx);
  cudnnBackendDescriptor_t op = pp.operation[layout].get();
  HG_CUDNN_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, kDesc, 1, &op, ctx);
  HG_CUDNN_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, ctx);
  HG_CUDNN_CHECK_FOR(cudnnBackendFinalize(graph.get()), ctx);
  pp.graph[layout] = std::move(graph);
}

// ---- engine configurations

namespace {

// Reads an array attribute of at most `N` enum values.
template <typename T, size_t N>
std::vector<T> get_notes(cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t attribute,
                         cudnnBackendAttributeType_t type) {
  std::array<T, N> values{};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(desc, attribute, type, int64_t(N), &count, values.data()) !=
      CUDNN_STATUS_SUCCESS) {
    take_last_error();
    return {};
  }
  return std::vector<T>(values.begin(), values.begin() + std::min<int64_t>(count, int64_t(N)));
}

}  // namespace

Candidate describe_config(Descriptor config, const CallContext& ctx) {
  Candidate c;
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, ctx);
  cudnnBackendDescriptor_t engine_raw = engine.get();
  int64_t count = 0;
  HG_CUDNN_CHECK_FOR(
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine_raw),
      ctx);
  int64_t index = -1;
  cudnnBackendGetAttribute(engine_raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                           &index);
  c.engine_index = index;
  for (const auto note : get_notes<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT>(
           engine_raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE)) {
    c.tensor_core |= note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    c.down_convert |= note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    c.reduced_precision |= note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    c.nondeterministic |= note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  }
  for (const auto note : get_notes<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT>(
           engine_raw, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE))
    c.runtime_compiled |= note == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;

  // The knob choices complete the name: one engine appears with several settings. They are read
  // into descriptors made beforehand, as many as a configuration can hold: asked for their count
  // alone (no array), cuDNN 9 reports none, and a configuration rebuilt from its engine alone
  // then runs that engine's default knobs (3x slower steps on the H200 with the tuning cache).
  c.name = fmt::format("engine {}", index);
  constexpr int64_t kCapacity = int64_t(cudnn_tuning::kMaxKnobs);
  std::vector<Descriptor> choices;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < kCapacity; ++i) {
    choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, ctx);
    raw.push_back(choices.back().get());
  }
  int64_t got = 0;
  if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, kCapacity, &got,
                               raw.data()) == CUDNN_STATUS_SUCCESS &&
      got > 0) {
    c.knobs_complete = got <= kCapacity;
    const int64_t knobs = std::min(got, kCapacity);
    c.name += " (";
    for (int64_t i = 0; i < knobs; ++i) {
      cudnnBackendKnobType_t type{};
      int64_t value = 0, n = 0;
      cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                               CUDNN_TYPE_KNOB_TYPE, 1, &n, &type);
      cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64,
                               1, &n, &value);
      c.name += fmt::format("{}{}={}", i > 0 ? " " : "", int(type), value);
      c.knobs.emplace_back(int64_t(type), value);
    }
    c.name += ")";
  }
  std::sort(c.knobs.begin(), c.knobs.end());  // the tuning cache compares them as a set
  take_last_error();
  c.config = std::move(config);
  return c;
}

namespace {

// The engine configurations cuDNN's heuristics list for `graph` in `mode`, best first (none
// when the mode has nothing for it).
std::vector<Descriptor> heuristic_configs(const Descriptor& graph, cudnnBackendHeurMode_t mode,
                                          const CallContext& ctx) {
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, ctx);
  cudnnBackendDescriptor_t graph_raw = graph.get();
  HG_CUDNN_SET(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               &graph_raw, ctx);
  HG_CUDNN_SET(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, ctx);
  int64_t count = 0;
  if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr) != CUDNN_STATUS_SUCCESS) {
    take_last_error();
    return {};
  }
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, ctx);
    raw.push_back(configs.back().get());
  }
  int64_t got = 0;
  HG_CUDNN_CHECK_FOR(
      cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
      ctx);
  configs.resize(size_t(std::clamp<int64_t>(got, 0, count)));
  return configs;
}

// Every engine cuDNN has for `graph`, each in a configuration with its default knobs, paired
// with its engine. The heuristics' lists leave out engines that win for f32: the FFT and
// Winograd ones, which PyTorch's benchmark reaches (bench/README.md, 2026-11-30).
std::vector<std::pair<Descriptor, Descriptor>> all_engine_configs(const Descriptor& graph,
                                                                  const CallContext& ctx) {
  int64_t count = 0, n = 0;
  if (cudnnBackendGetAttribute(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                               CUDNN_TYPE_INT64, 1, &n, &count) != CUDNN_STATUS_SUCCESS) {
    take_last_error();
    return {};
  }
  std::vector<std::pair<Descriptor, Descriptor>> out;
  cudnnBackendDescriptor_t graph_raw = graph.get();
  for (int64_t index = 0; index < count; ++index) {
    Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, ctx);
    HG_CUDNN_SET(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                 &graph_raw, ctx);
    HG_CUDNN_SET(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index, ctx);
    if (cudnnBackendFinalize(engine.get()) != CUDNN_STATUS_SUCCESS) {  // not for this graph
      take_last_error();
      continue;
    }
    Descriptor config(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, ctx);
    cudnnBackendDescriptor_t engine_raw = engine.get();
    HG_CUDNN_SET(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine_raw,
                 ctx);
    if (cudnnBackendFinalize(config.get()) != CUDNN_STATUS_SUCCESS) {
      take_last_error();
      continue;
    }
    out.emplace_back(std::move(engine), std::move(config));
  }
  return out;
}

}  // namespace

bool acceptable(const Candidate& c, const ConvPlan& plan) {
  if (c.down_convert) return false;
  if (c.reduced_precision && plan.dtype != DType::F32) return false;
  if (plan.dtype == DType::F32 && plan.math == MathMode::Exact && c.tensor_core) return false;
  if (plan.determinism == dnn::Determinism::Required && c.nondeterministic) return false;
  return true;
}

std::vector<Candidate> candidates(const ConvPlan& plan, const Descriptor& graph,
                                  bool heuristics_only,
                                  std::initializer_list<cudnnBackendHeurMode_t> modes) {
  const CallContext ctx = plan.context();
  std::vector<Candidate> out;
  std::unordered_set<std::string> seen;
  std::unordered_set<int64_t> engines;
  for (const cudnnBackendHeurMode_t mode : modes)
    for (Descriptor& config : heuristic_configs(graph, mode, ctx)) {
      Candidate c = describe_config(std::move(config), ctx);
      engines.insert(c.engine_index);
      if (!acceptable(c, plan) || !seen.insert(c.name).second) continue;
      out.push_back(std::move(c));
    }
  if (!heuristics_only)
    for (auto& [engine, config] : all_engine_configs(graph, ctx)) {
      Candidate c = describe_config(std::move(config), ctx);
      if (engines.count(c.engine_index) != 0 || c.runtime_compiled || !acceptable(c, plan))
        continue;
      c.engine = std::move(engine);
      engines.insert(c.engine_index);
      out.push_back(std::move(c));
    }
  std::stable_partition(out.begin(), out.end(),
                        [](const Candidate& c) { return !c.runtime_compiled; });
  return out;
}

// ---- plans and launches

Descriptor build_plan(cudnnHandle_t handle, const Candidate& c, size_t& workspace,
                      const CallContext& ctx) {
  Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, ctx);
  cudnnBackendDescriptor_t config = c.config.get();
  HG_CUDNN_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, ctx);
  HG_CUDNN_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               &config, ctx);
  int64_t bytes = 0, count = 0;
  if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                               CUDNN_TYPE_INT64, 1, &count, &bytes) != CUDNN_STATUS_SUCCESS ||
      bytes < 0) {
    take_last_error();
    return Descriptor();
  }
  workspace = size_t(bytes);
  return plan;
}

Descriptor variant_pack(void* x, void* w, void* y, void* workspace, const CallContext& ctx) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, ctx);
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* pointers[3] = {x, w, y};
  HG_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, ctx);
  HG_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers, ctx);
  HG_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, ctx);
  HG_CUDNN_CHECK_FOR(cudnnBackendFinalize(pack.get()), ctx);
  return pack;
}

cudnnStatus_t execute(cudnnHandle_t handle, const Descriptor& plan, void* x, void* w, void* y,
                      void* workspace, const CallContext& ctx) {
  const Descriptor pack = variant_pack(x, w, y, workspace, ctx);
  return cudnnBackendExecute(handle, plan.get(), pack.get());
}

}  // namespace hg::gpu::cudnn_conv
