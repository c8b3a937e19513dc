// A convolution's objects in cuDNN 9's graph ("backend") C API, which dnn_cudnn.cpp searches
// and runs: the operand and convolution descriptors, the graph of each pass, the engine
// configurations that may run it, their execution plans and the variant packs that launch
// them. CUDA builds only (the file names end in _cudnn).
//
// Each pass of a convolution (forward, backward data, backward filter) is a graph of one
// operation over three tensors: x [n,c,h,w] and y [n,k,p,q] with channels-last strides, the
// weights [k,c/groups,r,s] with KRSC strides; or, for the NCHW copies dnn_cudnn.cpp's search
// also tries, the same tensors with channels-first strides (NCHW; KCRS). The candidates for a
// pass are the engine configurations of cuDNN's heuristics (mode A, then the fallback list),
// then every other engine of the graph with its default knobs; those whose numerical notes the
// call does not allow are dropped (tensor cores, i.e. TF32, for f32 unless TF32 is allowed;
// inputs converted down; 16-bit sums; atomics when deterministic).
#pragma once

#include <cudnn.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hourglass/backend/gpu/cudnn_descriptor.h"
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/plan_key.h"

namespace hg::gpu::cudnn_conv {

using cudnn::CallContext;
using cudnn::Descriptor;
using dnn::ConvGeometry;

enum Pass : int { kForward = 0, kBackwardData = 1, kBackwardFilter = 2, kPasses = 3 };
inline constexpr const char* kPassNames[kPasses] = {"forward", "backward data", "backward filter"};

// How cuDNN sees a pass's operands: the call's own channels-last buffers, or channels-first
// copies of them (see the top of dnn_cudnn.cpp).
enum Layout : int { kChannelsLast = 0, kChannelsFirst = 1, kLayouts = 2 };
inline constexpr const char* kLayoutNames[kLayouts] = {"NHWC", "NCHW"};

// One pass's graph and chosen execution plan (what the plan was built from is kept alive beside
// it).
struct PassPlan {
  bool found = false;
  std::array<Descriptor, kLayouts> operation, graph;  // per layout, made when searched
  Descriptor engine, config, plan;
  std::vector<Descriptor> knobs;  // the knob choices of a configuration rebuilt from the cache
  std::string choice;             // the tuning cache's spelling of the chosen configuration
  Layout layout = kChannelsLast;  // of the chosen plan
  size_t workspace = 0;           // bytes, the engine's own (NCHW copies come on top)
  // Variant packs by their pointers (x, w, y, workspace): a training step repeats its
  // addresses, so steady-state calls reuse them instead of building one per call.
  std::unordered_map<PlanKey<4>, Descriptor, PlanKeyHash> packs;
};

struct ConvPlan {
  ConvGeometry geometry;
  DType dtype = DType::F32;
  MathMode math = MathMode::Exact;
  dnn::Determinism determinism = dnn::Determinism::Any;
  int64_t alignment = 16;
  struct Operands {
    Descriptor x, w, y;
  };
  std::array<Operands, kLayouts> operands;  // [kChannelsFirst] only when it is searched
  std::array<bool, kLayouts> searched{true, false};
  Descriptor conv;
  std::array<PassPlan, kPasses> pass;

  CallContext context() const { return CallContext{&geometry, dtype}; }
};

// Makes `plan`'s operand descriptors (x, w, y) in each layout `plan.searched` names, and its
// convolution descriptor: cross-correlation with f32 accumulation, padding symmetric as in
// Conv2dParams, groups following from the tensors (x's channels over the weights' channels).
void init_descriptors(ConvPlan& plan);

// The one-operation graph of a pass: y = conv(x, w), dx = conv_data(dy, w) or
// dw = conv_filter(x, dy), each with alpha 1 and beta 0 (the output is overwritten). Sets
// pp.operation[layout] and pp.graph[layout].
void init_graph(const ConvPlan& plan, Pass pass, Layout layout, PassPlan& pp, cudnnHandle_t handle);

// One engine configuration from the heuristics, with what its engine's notes say.
struct Candidate {
  Descriptor engine, config;             // engine: set when the configuration was made here
  std::vector<Descriptor> knob_choices;  // set when it was made from the tuning cache
  int64_t engine_index = -1;
  std::vector<std::pair<int64_t, int64_t>> knobs;  // (knob type, value), as cuDNN reports them
  std::string name;  // "engine 12 (knob=value ...)", for logs and to drop repeats
  bool tensor_core = false, down_convert = false, reduced_precision = false,
       nondeterministic = false, runtime_compiled = false;
  bool knobs_complete = true;  // false: more knobs than were read (not stored in the cache)
};

// Reads an engine configuration (kept as the result's `config`): its engine's index and notes,
// its knob choices and the name they make.
Candidate describe_config(Descriptor config, const CallContext& ctx);

// Whether a configuration's numerics suit the call (PyTorch's filter, plus the sums of 16-bit
// inputs): f32 without TF32 must not use tensor cores (they round inputs to TF32); nothing may
// convert inputs down, and 16-bit inputs must be summed in f32 (dnn.h promises f32
// accumulation); deterministic runs exclude atomics.
bool acceptable(const Candidate& c, const ConvPlan& plan);

// Acceptable configurations, each once: the heuristics' (mode A, then the fallback list), then
// every other engine with its default knobs unless `heuristics_only` (deterministic mode,
// which takes the heuristics' first). Engines compiled at run time come from the heuristics
// only, and last: they cost seconds to build. `modes` limits the heuristics queried (the
// deterministic search asks for the fallback list only when no mode-A configuration builds).
std::vector<Candidate> candidates(const ConvPlan& plan, const Descriptor& graph,
                                  bool heuristics_only,
                                  std::initializer_list<cudnnBackendHeurMode_t> modes = {
                                      CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK});

// An execution plan for `config`, or an empty descriptor when cuDNN cannot build it for this
// graph; `workspace` receives its workspace size.
Descriptor build_plan(cudnnHandle_t handle, const Candidate& c, size_t& workspace,
                      const CallContext& ctx);

// A variant pack: the pointers of one call (x or dx, w or dw, y or dy, the workspace).
Descriptor variant_pack(void* x, void* w, void* y, void* workspace, const CallContext& ctx);

// Runs an execution plan on x (dx), w (dw), y (dy), with a variant pack made for the call.
cudnnStatus_t execute(cudnnHandle_t handle, const Descriptor& plan, void* x, void* w, void* y,
                      void* workspace, const CallContext& ctx);

}  // namespace hg::gpu::cudnn_conv
