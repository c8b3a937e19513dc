// dnn.h on CUDA: cuDNN 9 through its graph ("backend") C API (cudnn_graph.h), the API PyTorch
// uses, which names each engine, its numerical notes and its workspace, and reaches engines the
// legacy v7-style calls (cudnnFind*AlgorithmEx) do not. What made f32 with TF32 off 7x slower
// than PyTorch was the workspace bound, not the API: in NHWC, cuDNN's fast f32 engines work on
// NCHW copies of the operands in their workspace (dnn.h, kMaxWorkspaceBytes; bench/README.md,
// 2026-11-30, has the per-layer numbers).
//
// Each pass of a convolution (forward, backward data, backward filter) is a graph of one
// operation; conv_plan_cudnn.h makes its descriptors and graph and lists its candidates, the
// engine configurations whose numerical notes suit the call. The first time a pass runs, the
// first kTimedCandidates of them that build and fit kMaxWorkspaceBytes are timed on the call's
// own buffers (this synchronises, acceptable only then) and the fastest is kept as an
// execution plan. In deterministic mode nothing is timed: the heuristics' first acceptable
// configuration is taken, so another process with the same cuDNN and GPU makes the same
// choice.
//
// Per device: one cudnnHandle_t bound to gpu::stream(device), and a map from the convolution's
// key (sizes, parameters, dtype, math mode, determinism, pointer alignment) to its plan. A
// steady-state call is a map lookup, a workspace from the caching allocator, a variant pack
// (the pointers; reused when they repeat) and cudnnBackendExecute: nothing synchronises. The
// per-device state is never destroyed: handles outlive every tensor and are reclaimed with the
// process (destroying them after the CUDA runtime has shut down would crash at exit).
//
// For f32 without TF32 the search also tries each pass in NCHW: some of cuDNN's fastest f32
// engines (FFT, Winograd, the NCHW implicit GEMMs) exist only for NCHW tensors. Such a
// candidate runs on NCHW copies of the operands kept in the call's workspace after the engine's
// own bytes: the pass's inputs are transposed in, its output transposed back
// (layout_kernels.h), and its timing includes those transposes, so it wins only where it wins
// whole. Tests can restrict the search to NCHW where it is tried
// (search_channels_first_only_for_testing).
//
// A search first asks the tuning cache (tuning_cudnn.h) and takes a cached choice once it is
// rebuilt and passes the candidates' checks (plan_from_cache); its own choice is stored there.
// Deterministic mode too: on the same GPU, driver and cuDNN the heuristics give that choice
// again, so the cache saves their queries and changes nothing.
//
// HOURGLASS_CUDNN_LOG=1 prints each pass's choice (engine, time, workspace) to stderr; =2 also
// every timed candidate.
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hourglass/backend/gpu/conv_plan_cudnn.h"
#include "hourglass/backend/gpu/cudnn_descriptor.h"
#include "hourglass/backend/gpu/dnn.h"
#include "hourglass/backend/gpu/layout_kernels.h"
#include "hourglass/backend/gpu/libraries.h"
#include "hourglass/backend/gpu/plan_key.h"
#include "hourglass/backend/gpu/plan_timer.h"
#include "hourglass/backend/gpu/tuning_cudnn.h"
#include "hourglass/base/environment.h"
#include "hourglass/base/error.h"
#include "hourglass/base/log.h"
#include "hourglass/device/device.h"
#include "hourglass/device/gpu/graph.h"
#include "hourglass/device/gpu/runtime.h"
#include "hourglass/ops/ops.h"
#include "hourglass/ops/tuning_cache.h"

namespace hg::gpu {

namespace {

using cudnn::CallContext;
using cudnn::Descriptor;
using cudnn::take_last_error;
using dnn::ConvGeometry;
// The graph-API objects of a convolution (conv_plan_cudnn.h).
using cudnn_conv::acceptable;
using cudnn_conv::build_plan;
using cudnn_conv::Candidate;
using cudnn_conv::candidates;
using cudnn_conv::ConvPlan;
using cudnn_conv::describe_config;
using cudnn_conv::execute;
using cudnn_conv::init_descriptors;
using cudnn_conv::init_graph;
using cudnn_conv::kLayoutNames;
using cudnn_conv::kPassNames;
using cudnn_conv::Layout;
using cudnn_conv::Pass;
using cudnn_conv::PassPlan;
using cudnn_conv::variant_pack;
using enum cudnn_conv::Layout;
using enum cudnn_conv::Pass;

// How many acceptable engine configurations the search times at most (the heuristics list
// about 5 for a convolution, the other engines about as many again).
constexpr int kTimedCandidates = 24;

// HOURGLASS_CUDNN_LOG: 0 (default), 1 (each choice), 2 (each timed candidate too).
int log_level() {
  static const int level = env::level("HOURGLASS_CUDNN_LOG", 0);
  return level;
}

// ---- keys

using ConvKey = PlanKey<18>;

// The alignment (at most 16 bytes: the vector width kernels may use) common to a call's
// pointers, part of its key.
int64_t common_alignment(std::initializer_list<const void*> pointers) {
  return int64_t(pointer_alignment(pointers, 16));
}

ConvKey make_key(const ConvGeometry& g, DType dtype, MathMode math, dnn::Determinism det,
                 int64_t alignment) {
  const Conv2dParams& p = g.params;
  return ConvKey{{g.n, g.h, g.w, g.c, g.k, g.r, g.s, p.stride_h, p.stride_w, p.pad_h, p.pad_w,
                  p.dilation_h, p.dilation_w, p.groups, int64_t(dtype), int64_t(math), int64_t(det),
                  alignment}};
}

// ---- plans

// Bound on PassPlan::packs (cleared when reached).
constexpr size_t kMaxPacksPerPass = 64;

void check_sizes(const ConvGeometry& g, DType dtype) {
  const int64_t cg = g.c / g.params.groups;
  const int64_t largest =
      std::max({g.n * g.h * g.w * g.c, g.n * g.p * g.q * g.k, g.k * g.r * g.s * cg});
  HG_CHECK(largest <= INT_MAX,
           "gpu conv2d: the {} convolution {} has a tensor of {} elements; hourglass's cuDNN "
           "convolutions take at most 2^31-1 (reduce train.batch_size or set train.micro_batch)",
           dtype_name(dtype), g.describe(), largest);
}

// search_channels_first_only_for_testing: NCHW only, where NCHW is searched at all.
std::atomic<bool> g_channels_first_only{false};

bool layout_allowed(Layout layout) {
  return !g_channels_first_only.load(std::memory_order_relaxed) || layout == kChannelsFirst;
}

// Decides which layouts the search tries for `plan` and makes their descriptors.
void init_plan(ConvPlan& plan) {
  // NCHW for f32 without TF32 (where NCHW-only engines win; with tensor cores NHWC is their
  // native layout), and not in deterministic mode, which times nothing and keeps one choice.
  const bool channels_first = plan.dtype == DType::F32 && plan.math == MathMode::Exact &&
                              plan.determinism != dnn::Determinism::Required &&
                              layout_allowed(kChannelsFirst);
  plan.searched = {!channels_first || layout_allowed(kChannelsLast), channels_first};
  init_descriptors(plan);
}

// ---- NCHW copies

// Byte offsets of the NCHW copies of x, w and y in a call's workspace, after the engine's own
// `engine_bytes`; `end` is the workspace size the call needs. Each starts 256-byte aligned.
struct ChannelsFirstCopies {
  size_t x = 0, w = 0, y = 0, end = 0;
};

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

ChannelsFirstCopies channels_first_copies(const ConvPlan& plan, size_t engine_bytes) {
  const ConvGeometry& g = plan.geometry;
  const size_t es = dtype_size(plan.dtype);
  ChannelsFirstCopies c;
  c.x = align_up(engine_bytes);
  c.w = c.x + align_up(size_t(g.n * g.c * g.h * g.w) * es);
  c.y = c.w + align_up(size_t(g.k * (g.c / g.params.groups) * g.r * g.s) * es);
  c.end = c.y + align_up(size_t(g.n * g.k * g.p * g.q) * es);
  return c;
}

// The workspace bytes a plan of `engine_bytes` needs in `layout`.
size_t call_bytes(const ConvPlan& plan, Layout layout, size_t engine_bytes) {
  return layout == kChannelsFirst ? channels_first_copies(plan, engine_bytes).end : engine_bytes;
}

// The pointers cuDNN is given for a call: the call's own (NHWC), or the copies (NCHW).
struct CallPointers {
  void *x, *w, *y;
};

// [n, c, h*w] <-> [n, h*w, c] for x and y; [k, c/groups, r*s] <-> [k, r*s, c/groups] for w.
void to_channels_first(const void* in, void* out, int64_t n, int64_t c, int64_t spatial,
                       DType dtype, gpuStream_t s) {
  launch_batched_transpose(in, out, n, spatial, c, dtype, s);
}
void to_channels_last(const void* in, void* out, int64_t n, int64_t c, int64_t spatial, DType dtype,
                      gpuStream_t s) {
  launch_batched_transpose(in, out, n, c, spatial, dtype, s);
}

// Before a pass in `layout`: in NCHW, the pass's inputs are transposed into their copies in
// `workspace` (forward: x and w; backward data: dy and w; backward filter: x and dy).
CallPointers prepare(const ConvPlan& plan, Pass pass, Layout layout, const CallPointers& call,
                     void* workspace, size_t engine_bytes, gpuStream_t s) {
  if (layout == kChannelsLast) return call;
  const ConvGeometry& g = plan.geometry;
  const ChannelsFirstCopies c = channels_first_copies(plan, engine_bytes);
  char* base = static_cast<char*>(workspace);
  const CallPointers copies{base + c.x, base + c.w, base + c.y};
  const int64_t cg = g.c / g.params.groups;
  if (pass != kBackwardData)
    to_channels_first(call.x, copies.x, g.n, g.c, g.h * g.w, plan.dtype, s);
  if (pass != kBackwardFilter)
    to_channels_first(call.w, copies.w, g.k, cg, g.r * g.s, plan.dtype, s);
  if (pass != kForward) to_channels_first(call.y, copies.y, g.n, g.k, g.p * g.q, plan.dtype, s);
  return copies;
}

// After a pass in `layout`: in NCHW, its output is transposed back into the call's buffer.
void finish(const ConvPlan& plan, Pass pass, Layout layout, const CallPointers& used,
            const CallPointers& call, gpuStream_t s) {
  if (layout == kChannelsLast) return;
  const ConvGeometry& g = plan.geometry;
  switch (pass) {
    case kForward: to_channels_last(used.y, call.y, g.n, g.k, g.p * g.q, plan.dtype, s); break;
    case kBackwardData: to_channels_last(used.x, call.x, g.n, g.c, g.h * g.w, plan.dtype, s); break;
    default:
      to_channels_last(used.w, call.w, g.k, g.c / g.params.groups, g.r * g.s, plan.dtype, s);
      break;
  }
}

// ---- per-device state

struct DeviceState {
  std::once_flag once;
  std::mutex mutex;  // guards the handle's use and the plans
  cudnnHandle_t handle = nullptr;
  std::unordered_map<ConvKey, std::unique_ptr<ConvPlan>, PlanKeyHash> plans;
};

std::array<DeviceState, kMaxDevices>& all_states() {
  static auto* states = new std::array<DeviceState, kMaxDevices>();  // never destroyed: see top
  return *states;
}

DeviceState& device_state(int device) {
  HG_ASSERT(device >= 0 && device < kMaxDevices, "gpu index {} out of range", device);
  DeviceState& st = all_states()[size_t(device)];
  std::call_once(st.once, [&] {
    set_device(device);
    cudnnHandle_t handle = nullptr;
    HG_CUDNN_CHECK(cudnnCreate(&handle));
    HG_CUDNN_CHECK(cudnnSetStream(handle, stream(device)));
    st.handle = handle;
  });
  return st;
}

ConvPlan& plan_for(DeviceState& st, const ConvGeometry& g, DType dtype, MathMode math,
                   int64_t alignment) {
  const dnn::Determinism det = dnn::determinism();
  const ConvKey key = make_key(g, dtype, math, det, alignment);
  const auto it = st.plans.find(key);
  if (it != st.plans.end()) return *it->second;
  check_sizes(g, dtype);
  auto plan = std::make_unique<ConvPlan>();
  plan->geometry = g;
  plan->dtype = dtype;
  plan->math = math;
  plan->determinism = det;
  plan->alignment = alignment;
  init_plan(*plan);
  return *st.plans.emplace(key, std::move(plan)).first->second;
}

// ---- engine search

// Device memory for the search: `bytes` when the allocator can give it, else less (the search
// then skips configurations that need more); bytes is updated to what was obtained.
Tensor search_workspace(size_t& bytes, int device) {
  while (bytes > 0) {
    try {
      return Tensor::empty({int64_t(bytes)}, DType::U8, Device::gpu(device));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      bytes = bytes >= (size_t(4) << 20) ? bytes / 4 : 0;
    }
  }
  return Tensor();
}

// dnn.h's SearchCounts.
std::atomic<int64_t> g_searched{0}, g_timed{0}, g_from_cache{0};

std::string tuning_key(const ConvPlan& plan, Pass pass) {
  return cudnn_tuning::conv_key(kPassNames[pass], plan.geometry, plan.dtype, plan.math,
                                plan.determinism, plan.alignment, plan.searched[kChannelsLast],
                                plan.searched[kChannelsFirst]);
}

// Takes pass `pass`'s plan from the tuning cache when it holds a choice for it that still
// builds and passes the search's checks; false (the cache told why) otherwise.
bool plan_from_cache(DeviceState& st, ConvPlan& plan, Pass pass, int device,
                     const std::string& key) {
  const std::string& identity = cudnn_tuning::identity(device);
  const std::optional<std::string> text = ops::tuning_cache_lookup(identity, key);
  if (!text) return false;
  auto reject = [&](const std::string& why) {
    ops::tuning_cache_reject(identity, key, why);
    return false;
  };
  const std::optional<cudnn_tuning::EngineChoice> choice = cudnn_tuning::parse_choice(*text);
  if (!choice) return reject("it is not 'layout:engine:knob=value,...'");
  const Layout layout = Layout(choice->layout);
  if (!plan.searched[layout])
    return reject(fmt::format("the search does not try {} for it", kLayoutNames[layout]));
  PassPlan& pp = plan.pass[size_t(pass)];
  const CallContext ctx = plan.context();
  if (!pp.graph[layout]) init_graph(plan, pass, layout, pp, st.handle);
  cudnnBackendDescriptor_t engine = nullptr, config = nullptr;
  std::vector<cudnnBackendDescriptor_t> knobs;
  if (cudnn_tuning::make_engine_config(pp.graph[layout].get(), *choice, &engine, &config, &knobs) !=
      CUDNN_STATUS_SUCCESS) {
    take_last_error();
    return reject("cuDNN does not offer that engine configuration for this convolution");
  }
  Descriptor engine_owner = Descriptor::adopt(engine);
  std::vector<Descriptor> knob_owners;
  for (cudnnBackendDescriptor_t k : knobs) knob_owners.push_back(Descriptor::adopt(k));
  Candidate c;
  try {  // a configuration made from the file is described as the search's are
    c = describe_config(Descriptor::adopt(config), ctx);
  } catch (const Error& e) {
    return reject(e.message());
  }
  c.engine = std::move(engine_owner);
  c.knob_choices = std::move(knob_owners);
  std::vector<std::pair<int64_t, int64_t>> wanted = choice->knobs;
  std::sort(wanted.begin(), wanted.end());
  if (c.engine_index != choice->engine || c.knobs != wanted)
    return reject(fmt::format("cuDNN reads it back as {}", c.name));
  if (!acceptable(c, plan)) return reject("its engine's numerical notes do not suit this call");
  size_t workspace = 0;
  const auto build_start = std::chrono::steady_clock::now();
  Descriptor built = build_plan(st.handle, c, workspace, ctx);
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - build_start)
          .count();
  if (!built) return reject("its execution plan does not build");
  if (workspace > dnn::kMaxWorkspaceBytes)
    return reject(fmt::format("it needs {} bytes of workspace, over the bound of {}", workspace,
                              dnn::kMaxWorkspaceBytes));
  if (log_level() >= 1)
    fmt::print(stderr,
               "cuDNN {} {} {}: {} {} (tuning cache; {} bytes of workspace; plan built in "
               "{:.1f} ms)\n",
               kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe(),
               kLayoutNames[layout], c.name, workspace, build_ms);
  pp.engine = std::move(c.engine);
  pp.config = std::move(c.config);
  pp.knobs = std::move(c.knob_choices);
  pp.plan = std::move(built);
  pp.layout = layout;
  pp.workspace = workspace;
  pp.choice = *text;
  pp.found = true;
  ++g_from_cache;
  return true;
}

// Chooses pass `pass`'s execution plan (see the top of the file) on the call's own buffers,
// or takes it from the tuning cache.
void search(DeviceState& st, ConvPlan& plan, Pass pass, int device, const CallPointers& call) {
  const std::string key = tuning_key(plan, pass);
  if (plan_from_cache(st, plan, pass, device, key)) return;
  PassPlan& pp = plan.pass[size_t(pass)];
  const CallContext ctx = plan.context();
  const bool deterministic = plan.determinism == dnn::Determinism::Required;
  const gpuStream_t s = stream(device);

  // Build plans in the candidates' order, per layout: the first acceptable one in
  // deterministic mode, else up to kTimedCandidates.
  const size_t wanted = deterministic ? 1 : kTimedCandidates;
  struct Built {
    Candidate candidate;
    Layout layout;
    Descriptor plan;
    size_t workspace;
    float ms = 0;
  };
  std::vector<Built> built;
  size_t listed = 0;
  for (const Layout layout : {kChannelsLast, kChannelsFirst}) {
    if (!plan.searched[layout]) continue;
    if (!pp.graph[layout]) init_graph(plan, pass, layout, pp, st.handle);
    // Deterministic mode takes the first configuration that builds, in the order of mode A's
    // list and then the fallback list, so the fallback list is asked for only when needed (each
    // heuristics query and its configurations' notes cost milliseconds, at start-up, per pass).
    size_t kept = 0;
    auto build_from = [&](std::vector<Candidate> cands) {
      listed += cands.size();
      for (Candidate& c : cands) {
        if (kept >= wanted) break;
        size_t workspace = 0;
        Descriptor p = build_plan(st.handle, c, workspace, ctx);
        if (!p || workspace > dnn::kMaxWorkspaceBytes) continue;
        built.push_back(Built{std::move(c), layout, std::move(p), workspace});
        ++kept;
      }
    };
    if (deterministic) {
      build_from(candidates(plan, pp.graph[layout], true, {CUDNN_HEUR_MODE_A}));
      if (kept == 0)
        build_from(candidates(plan, pp.graph[layout], true, {CUDNN_HEUR_MODE_FALLBACK}));
    } else {
      build_from(candidates(plan, pp.graph[layout], false));
    }
  }

  size_t chosen = 0;
  int timed = 0;
  if (built.size() > 1) {
    size_t bytes = 0;
    for (const Built& b : built) bytes = std::max(bytes, call_bytes(plan, b.layout, b.workspace));
    Tensor workspace = search_workspace(bytes, device);
    void* ws = workspace.defined() ? workspace.data_ptr() : nullptr;
    PlanTimer timer(s);
    float best = -1.0f;
    for (size_t i = 0; i < built.size(); ++i) {
      Built& b = built[i];
      const auto run = [&] {
        const CallPointers used = prepare(plan, pass, b.layout, call, ws, b.workspace, s);
        const cudnnStatus_t status = execute(st.handle, b.plan, used.x, used.w, used.y, ws, ctx);
        finish(plan, pass, b.layout, used, call, s);
        return status == CUDNN_STATUS_SUCCESS;
      };
      b.ms = call_bytes(plan, b.layout, b.workspace) > bytes ? -1.0f : timer.time(run, best);
      if (b.ms < 0) {
        take_last_error();  // that configuration's, not sticky
        continue;
      }
      ++timed;
      if (log_level() >= 2)
        fmt::print(stderr, "cuDNN {} {}: {} {} {:.3f} ms, {} bytes of workspace\n",
                   kPassNames[pass], plan.geometry.describe(), kLayoutNames[b.layout],
                   b.candidate.name, b.ms, b.workspace);
      if (best < 0 || b.ms < best) {
        best = b.ms;
        chosen = i;
      }
    }
    if (best < 0) built.clear();  // none ran
  }
  if (built.empty())
    throw Error(
        ErrorKind::InvalidInput,
        fmt::format("gpu conv2d: cuDNN has no {} engine for the {} convolution {}{}{} "
                    "({} configurations listed)",
                    kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe(),
                    plan.dtype == DType::F32 && plan.math == MathMode::Exact ? " without TF32" : "",
                    plan.determinism == dnn::Determinism::Required ? " that is deterministic" : "",
                    listed),
        "change the convolution's shape, padding, dilation or groups, use another "
        "precision, or device = \"cpu\"");
  Built& b = built[chosen];
  if (log_level() >= 1)
    fmt::print(stderr,
               "cuDNN {} {} {}: {} {} ({:.3f} ms, fastest of {} timed; {} bytes of "
               "workspace)\n",
               kPassNames[pass], dtype_name(plan.dtype), plan.geometry.describe(),
               kLayoutNames[b.layout], b.candidate.name, b.ms, timed, b.workspace);
  pp.engine = std::move(b.candidate.engine);
  pp.config = std::move(b.candidate.config);
  pp.plan = std::move(b.plan);
  pp.layout = b.layout;
  pp.workspace = b.workspace;
  pp.found = true;
  pp.choice = cudnn_tuning::encode_choice({b.layout, b.candidate.engine_index, b.candidate.knobs});
  ++g_searched;
  g_timed += timed;
  if (b.candidate.knobs_complete && pp.choice.size() <= ops::kMaxTuningChoice)
    ops::tuning_cache_store(cudnn_tuning::identity(device), key, pp.choice);
}

// Workspaces up to this size are, during a graph capture, the graph's own (keep_for_graph).
constexpr size_t kGraphOwnWorkspaceBytes = size_t(64) << 10;

// The workspace of a call, from the caching allocator (freed when the call returns; the
// stream-ordered allocator reuses it only after the kernels issued before). During a graph
// capture a small one is new memory kept for the graph's life instead: many engines zero a
// counter in their workspace before their kernel, and in memory of the graph's own that
// memset moves off the step's critical path, to the graph's start (graph.h).
Tensor call_workspace(size_t bytes, int device) {
  if (bytes == 0) return Tensor();
  if (bytes > kGraphOwnWorkspaceBytes || !gpu::recording_graph())
    return Tensor::empty({int64_t(bytes)}, DType::U8, Device::gpu(device));
  Tensor ws;
  {
    gpu::FreshPoolBlocks fresh;
    ws = Tensor::empty({int64_t(bytes)}, DType::U8, Device::gpu(device));
  }
  gpu::keep_for_graph(ws.data_ptr(), ws.nbytes(), std::make_shared<const Tensor>(ws));
  return ws;
}

void* pointer_of(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// One pass of a convolution on x (dx), w (dw), y (dy): the plan from the cache or a search,
// then the launch on the device's stream.
void run_pass(Pass pass, const ConvGeometry& g, MathMode math, DType dtype, int device,
              const Tensor& x, const Tensor& w, const Tensor& y) {
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  void* xp = x.data_ptr();
  void* wp = w.data_ptr();
  void* yp = y.data_ptr();
  ConvPlan& plan = plan_for(st, g, dtype, math, common_alignment({xp, wp, yp}));
  PassPlan& pp = plan.pass[size_t(pass)];
  const CallPointers call{xp, wp, yp};
  if (!pp.found) {
    const ops::PlanningScope planning(true);
    search(st, plan, pass, device, call);
  }
  const Tensor workspace = call_workspace(call_bytes(plan, pp.layout, pp.workspace), device);
  void* wsp = pointer_of(workspace);
  const gpuStream_t s = stream(device);
  const CallPointers used = prepare(plan, pass, pp.layout, call, wsp, pp.workspace, s);
  const PlanKey<4> pointers{
      {int64_t(reinterpret_cast<intptr_t>(used.x)), int64_t(reinterpret_cast<intptr_t>(used.w)),
       int64_t(reinterpret_cast<intptr_t>(used.y)), int64_t(reinterpret_cast<intptr_t>(wsp))}};
  auto pack = pp.packs.find(pointers);
  if (pack == pp.packs.end()) {
    if (pp.packs.size() >= kMaxPacksPerPass) pp.packs.clear();
    pack =
        pp.packs.emplace(pointers, variant_pack(used.x, used.w, used.y, wsp, plan.context())).first;
  }
  HG_CUDNN_CHECK_FOR(cudnnBackendExecute(st.handle, pp.plan.get(), pack->second.get()),
                     plan.context());
  finish(plan, pass, pp.layout, used, call, s);
}

}  // namespace

// ---- dnn.h

void dnn::prepare(int device) { (void)device_state(device); }

dnn::Determinism dnn::determinism() {
  return ops::deterministic() ? Determinism::Required : Determinism::Any;
}

void dnn::conv_forward(const ConvGeometry& g, MathMode math, const Tensor& x, const Tensor& weight,
                       Tensor& y) {
  run_pass(kForward, g, math, x.dtype(), x.device().index, x, weight, y);
}

void dnn::conv_backward_data(const ConvGeometry& g, MathMode math, const Tensor& dy,
                             const Tensor& weight, Tensor& dx) {
  run_pass(kBackwardData, g, math, dy.dtype(), dy.device().index, dx, weight, dy);
}

void dnn::conv_backward_filter(const ConvGeometry& g, MathMode math, const Tensor& dy,
                               const Tensor& x, Tensor& dweight) {
  run_pass(kBackwardFilter, g, math, dy.dtype(), dy.device().index, x, dweight, dy);
}

dnn::SearchCounts dnn::search_counts() {
  return SearchCounts{g_searched.load(), g_timed.load(), g_from_cache.load()};
}

std::map<std::string, std::string> dnn::planned_choices(int device) {
  DeviceState& st = device_state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  std::map<std::string, std::string> out;
  for (const auto& [key, plan] : st.plans)
    for (int pass = 0; pass < kPasses; ++pass)
      if (plan->pass[size_t(pass)].found)
        out[tuning_key(*plan, Pass(pass))] = plan->pass[size_t(pass)].choice;
  return out;
}

void dnn::search_channels_first_only_for_testing() {
  g_channels_first_only.store(true, std::memory_order_relaxed);
}

void dnn::forget_plans_for_testing() {
  for (DeviceState& st : all_states()) {
    std::lock_guard<std::mutex> lock(st.mutex);
    st.plans.clear();
  }
}

// ---- libraries.h

std::string dnn_library_version() {
  // cuDNN 9 numbers versions major * 10000 + minor * 100 + patch.
  const size_t v = cudnnGetVersion();
  return fmt::format("cuDNN {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace hg::gpu
