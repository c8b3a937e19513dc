// CUPTI's activity API behind KernelActivity (kernel_activity.h), CUDA builds only (HIP builds
// leave out *_cupti.cpp, src/CMakeLists.txt). libcupti is opened with dlopen, never linked:
// only its header's types are used here. Enabled: CONCURRENT_KERNEL (does not serialise
// kernels), MEMCPY, MEMSET, EXTERNAL_CORRELATION, and RUNTIME and DRIVER, whose API records are
// what CUPTI precedes with an external-correlation record while an id is pushed (cupti_activity.h,
// cuptiActivityPushExternalCorrelationId); their records are read only for that. A kernel's
// op is the external id of the API call that launched it (same correlation id). The library
// stays loaded for the process (CUPTI cannot be unloaded safely); the kinds are enabled while
// at least one collector lives.
//
// Graph nodes: while a collector lives, a callback subscriber (cuptiSubscribe) receives the
// resource domain's GRAPHNODE_CREATED (inside the launch that stream capture turns into a node,
// on the capturing thread) and GRAPHNODE_CLONED (instantiation copies each node into the
// executable graph). A node made while an op is pushed on that thread (a mirror of the pushes,
// t_ops) maps its id (cuptiGetGraphNodeId) to the op's external id; a clone maps to its
// original's. Replayed work carries a node id (graphNodeId), the clone's or the original's:
// both are mapped. Its API call is the graph launch, whose external id, pushed by push_replay()
// with kReplayBit set, names the replay. One subscriber per process is allowed: when another
// tool holds it, graph nodes are not seen (graph_note()).
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "hourglass/base/environment.h"
#include "hourglass/base/log.h"
#include "hourglass/device/kernel_activity.h"

#ifndef HOURGLASS_CUPTI_DEFAULT_PATH
#define HOURGLASS_CUPTI_DEFAULT_PATH ""
#endif

namespace hg::detail {

namespace {

constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER};
constexpr size_t kBufferBytes = 8 << 20;
// The collector's number goes in the top bits of each external id, so that overlapping
// collectors tell their records apart.
constexpr int kTagShift = 44;
// Set in the external ids push_replay() pushes (below the tag; op and replay ids stay under it).
constexpr uint64_t kReplayBit = uint64_t(1) << (kTagShift - 1);
constexpr uint64_t kIdMask = kReplayBit - 1;
constexpr uint64_t kTagMask = ~((uint64_t(1) << kTagShift) - 1);

// The calls used, looked up in the library.
struct CuptiApi {
  void* handle = nullptr;
  std::string file;
  CUptiResult(CUPTIAPI* register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                            CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult(CUPTIAPI* enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* flush_all)(uint32_t) = nullptr;
  CUptiResult(CUPTIAPI* next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult(CUPTIAPI* push)(CUpti_ExternalCorrelationKind, uint64_t) = nullptr;
  CUptiResult(CUPTIAPI* pop)(CUpti_ExternalCorrelationKind, uint64_t*) = nullptr;
  CUptiResult(CUPTIAPI* timestamp)(uint64_t*) = nullptr;
  CUptiResult(CUPTIAPI* result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult(CUPTIAPI* version)(uint32_t*) = nullptr;
  // The callback API, for graph nodes (optional: without it graph nodes are not seen).
  CUptiResult(CUPTIAPI* subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult(CUPTIAPI* unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult(CUPTIAPI* enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                         CUpti_CallbackId) = nullptr;
  CUptiResult(CUPTIAPI* graph_node_id)(CUgraphNode, uint64_t*) = nullptr;

  std::string describe(CUptiResult r) const {
    const char* text = nullptr;
    if (result_string != nullptr && result_string(r, &text) == CUPTI_SUCCESS && text != nullptr)
      return text;
    return fmt::format("CUPTI error {}", int(r));
  }
};

// A record as read from a buffer, its op not yet known (the external-correlation record of its
// launch may come in another buffer).
struct RawRecord {
  KernelRecord record;
  uint32_t correlation = 0;
  uint64_t graph_node = 0;  // 0: not a graph node's
  uint64_t start_ns = 0, end_ns = 0;
};

struct State {
  std::mutex mutex;
  std::map<std::string, CuptiApi> libraries;  // by file, loaded once
  const CuptiApi* active = nullptr;           // the library whose kinds are enabled
  int collectors = 0;
  int next_tag = 1;
  std::vector<RawRecord> records;
  std::unordered_map<uint32_t, uint64_t> external;     // correlation id -> external id
  std::unordered_map<const char*, std::string> names;  // CUPTI's name strings, demangled
  // Graph nodes, while a subscriber is held: node id -> the external id pushed at its making.
  CUpti_SubscriberHandle subscriber = nullptr;
  std::string graph_note;  // why there is no subscriber
  std::mutex nodes_mutex;  // the callbacks run inside CUDA calls, apart from `mutex`
  std::unordered_map<uint64_t, uint64_t> nodes;
};

State& state() {
  static State* s = new State;  // outlives the collectors of static objects
  return *s;
}

// The external ids push_op() pushed on this thread and not yet popped, innermost last.
thread_local std::vector<uint64_t> t_ops;

void CUPTIAPI on_resource(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbdata == nullptr) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(cbdata);
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  const auto* api = static_cast<const CuptiApi*>(userdata);
  if (graph == nullptr || api == nullptr || graph->node == nullptr) return;
  State& s = state();
  uint64_t node = 0;
  if (api->graph_node_id(graph->node, &node) != CUPTI_SUCCESS || node == 0) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    if (t_ops.empty()) return;  // made outside any op
    std::lock_guard lock(s.nodes_mutex);
    s.nodes[node] = t_ops.back();
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
    uint64_t original = 0;
    if (graph->originalNode == nullptr ||
        api->graph_node_id(graph->originalNode, &original) != CUPTI_SUCCESS)
      return;
    std::lock_guard lock(s.nodes_mutex);
    if (auto it = s.nodes.find(original); it != s.nodes.end()) s.nodes[node] = it->second;
  }
}

// Subscribes to the graph-node callbacks (the first collector); on failure graph_note says why.
void subscribe(State& s, const CuptiApi& api) {
  s.graph_note.clear();
  if (api.subscribe == nullptr || api.enable_callback == nullptr || api.graph_node_id == nullptr) {
    s.graph_note = "libcupti has no callback API (cuptiSubscribe, cuptiGetGraphNodeId)";
    return;
  }
  CUpti_SubscriberHandle handle = nullptr;
  CUptiResult r = api.subscribe(&handle, on_resource, const_cast<CuptiApi*>(&api));
  if (r != CUPTI_SUCCESS) {
    s.graph_note = fmt::format(
        "cuptiSubscribe failed: {} (CUPTI allows one subscriber per process: another tool may "
        "hold it)",
        api.describe(r));
    return;
  }
  for (CUpti_CallbackId cbid :
       {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED}) {
    r = api.enable_callback(1, handle, CUPTI_CB_DOMAIN_RESOURCE, cbid);
    if (r != CUPTI_SUCCESS) {
      s.graph_note =
          fmt::format("cuptiEnableCallback(resource, {}) failed: {}", int(cbid), api.describe(r));
      if (api.unsubscribe != nullptr) (void)api.unsubscribe(handle);
      return;
    }
  }
  s.subscriber = handle;
}

void unsubscribe(State& s, const CuptiApi& api) {
  if (s.subscriber != nullptr && api.unsubscribe != nullptr) (void)api.unsubscribe(s.subscriber);
  s.subscriber = nullptr;
  std::lock_guard lock(s.nodes_mutex);
  s.nodes.clear();
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void read_record(State& s, const CUpti_Activity* a) {
  RawRecord r;
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
      auto [it, added] = s.names.try_emplace(k->name);
      if (added) it->second = demangle_kernel_name(k->name);
      r.record.kind = ActivityKind::Kernel;
      r.record.name = it->second;
      r.start_ns = k->start, r.end_ns = k->end;
      r.correlation = k->correlationId;
      r.graph_node = k->graphNodeId;
      r.record.stream = k->streamId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
      static const char* const kinds[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH",
                                          "AtoA",    "AtoD", "DtoA", "DtoD", "HtoH"};
      const unsigned kind = m->copyKind < 10 ? m->copyKind : 0;
      r.record.kind = ActivityKind::Memcpy;
      r.record.name = std::string("memcpy ") + kinds[kind];
      r.record.bytes = m->bytes;
      r.start_ns = m->start, r.end_ns = m->end;
      r.correlation = m->correlationId;
      r.graph_node = m->graphNodeId;
      r.record.stream = m->streamId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
      r.record.kind = ActivityKind::Memset;
      r.record.name = "memset";
      r.record.bytes = m->bytes;
      r.start_ns = m->start, r.end_ns = m->end;
      r.correlation = m->correlationId;
      r.graph_node = m->graphNodeId;
      r.record.stream = m->streamId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(a);
      if (e->externalKind == kExternalKind) s.external[e->correlationId] = e->externalId;
      return;
    }
    default: return;  // the API records: only their external-correlation records are used
  }
  s.records.push_back(std::move(r));
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  State& s = state();
  {
    std::lock_guard lock(s.mutex);
    if (s.active != nullptr && valid > 0) {
      CUpti_Activity* record = nullptr;
      while (s.active->next_record(buffer, valid, &record) == CUPTI_SUCCESS) read_record(s, record);
    }
  }
  std::free(buffer);
}

template <typename F>
bool find(void* handle, const char* name, F& f, std::string& why_not) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  if (f == nullptr) why_not = fmt::format("libcupti has no {}", name);
  return f != nullptr;
}

// The library named by HOURGLASS_CUPTI_LIBRARY, else libcupti.so.13 / libcupti.so on the
// loader's path, else the toolkit's this build was made with. Null with `why_not` on failure.
const CuptiApi* load(State& s, std::string& why_not) {
  std::vector<std::string> files;
  const char* override_file = env::get("HOURGLASS_CUPTI_LIBRARY");
  if (override_file != nullptr && *override_file != '\0') {
    files = {override_file};
  } else {
    files = {"libcupti.so.13", "libcupti.so"};
    if (*HOURGLASS_CUPTI_DEFAULT_PATH != '\0') files.emplace_back(HOURGLASS_CUPTI_DEFAULT_PATH);
  }
  std::string errors;
  for (const std::string& file : files) {
    if (auto it = s.libraries.find(file); it != s.libraries.end()) return &it->second;
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e ? e : file);
      continue;
    }
    CuptiApi api;
    api.handle = handle;
    api.file = file;
    if (!find(handle, "cuptiActivityRegisterCallbacks", api.register_callbacks, why_not) ||
        !find(handle, "cuptiActivityEnable", api.enable, why_not) ||
        !find(handle, "cuptiActivityDisable", api.disable, why_not) ||
        !find(handle, "cuptiActivityFlushAll", api.flush_all, why_not) ||
        !find(handle, "cuptiActivityGetNextRecord", api.next_record, why_not) ||
        !find(handle, "cuptiActivityPushExternalCorrelationId", api.push, why_not) ||
        !find(handle, "cuptiActivityPopExternalCorrelationId", api.pop, why_not) ||
        !find(handle, "cuptiGetTimestamp", api.timestamp, why_not)) {
      dlclose(handle);
      return nullptr;
    }
    (void)find(handle, "cuptiGetResultString", api.result_string, why_not);
    (void)find(handle, "cuptiGetVersion", api.version, why_not);
    (void)find(handle, "cuptiSubscribe", api.subscribe, why_not);
    (void)find(handle, "cuptiUnsubscribe", api.unsubscribe, why_not);
    (void)find(handle, "cuptiEnableCallback", api.enable_callback, why_not);
    (void)find(handle, "cuptiGetGraphNodeId", api.graph_node_id, why_not);
    why_not.clear();
    const CUptiResult r = api.register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
      why_not = fmt::format("cuptiActivityRegisterCallbacks failed: {}", api.describe(r));
      dlclose(handle);
      return nullptr;
    }
    return &s.libraries.emplace(file, std::move(api)).first->second;
  }
  why_not = "libcupti could not be opened (" + errors + ")";
  return nullptr;
}

class CuptiActivity final : public KernelActivity {
 public:
  CuptiActivity(const CuptiApi& api, int tag, uint64_t origin_ns, std::string graph_note)
      : api_(api),
        tag_(uint64_t(tag) << kTagShift),
        origin_ns_(origin_ns),
        graph_note_(std::move(graph_note)) {}

  ~CuptiActivity() override {
    State& s = state();
    (void)api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(s.mutex);
    if (--s.collectors > 0) return;
    for (CUpti_ActivityKind kind : kKinds) (void)api_.disable(kind);
    unsubscribe(s, api_);
    s.active = nullptr;
    s.records.clear();
    s.external.clear();
  }

  void push_op(uint64_t op_id) override {
    t_ops.push_back(tag_ | (op_id & kIdMask));
    (void)api_.push(kExternalKind, t_ops.back());
  }
  void pop_op() override {
    if (!t_ops.empty()) t_ops.pop_back();
    uint64_t last = 0;
    (void)api_.pop(kExternalKind, &last);
  }
  void push_replay(uint64_t replay_id) override {
    (void)api_.push(kExternalKind, tag_ | kReplayBit | (replay_id & kIdMask));
  }
  void pop_replay() override {
    uint64_t last = 0;
    (void)api_.pop(kExternalKind, &last);
  }
  bool graph_nodes() const override { return graph_note_.empty(); }
  const std::string& graph_note() const override { return graph_note_; }

  std::vector<KernelRecord> collect() override {
    State& s = state();
    (void)api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard lock(s.mutex);
    std::vector<RawRecord> keep;
    std::vector<KernelRecord> out;
    std::lock_guard nodes_lock(s.nodes_mutex);
    for (RawRecord& r : s.records) {
      const auto it = s.external.find(r.correlation);
      const uint64_t external = it != s.external.end() ? it->second : 0;
      // A graph node's op was pushed at its making; its launch's id names the replay.
      uint64_t op = external & kReplayBit ? 0 : external;
      const uint64_t replay = external & kReplayBit ? external : 0;
      if (r.graph_node != 0) {
        const auto node = s.nodes.find(r.graph_node);
        op = node != s.nodes.end() ? node->second : 0;
      }
      const bool mine =
          (op != 0 && (op & kTagMask) == tag_) || (replay != 0 && (replay & kTagMask) == tag_);
      if (!mine && (op != 0 || replay != 0)) {  // another collector's op or replay
        keep.push_back(std::move(r));
        continue;
      }
      if (r.start_ns < origin_ns_) continue;  // before this collector started
      r.record.op_id = (op & kTagMask) == tag_ ? op & kIdMask : 0;
      r.record.replay = (replay & kTagMask) == tag_ ? replay & kIdMask : 0;
      r.record.start_us = double(r.start_ns - origin_ns_) / 1000;
      r.record.end_us = double(r.end_ns > r.start_ns ? r.end_ns - origin_ns_ : 0) / 1000;
      if (r.end_ns <= r.start_ns) r.record.end_us = r.record.start_us;
      out.push_back(std::move(r.record));
    }
    s.records = std::move(keep);
    return out;
  }

  std::string source() const override {
    uint32_t v = 0;
    if (api_.version != nullptr && api_.version(&v) == CUPTI_SUCCESS)
      return fmt::format("CUPTI {} ({})", v, api_.file);
    return fmt::format("CUPTI ({})", api_.file);
  }

 private:
  const CuptiApi& api_;
  uint64_t tag_;
  uint64_t origin_ns_;
  std::string graph_note_;  // "" while graph nodes are seen
};

}  // namespace

void cupti_graph_node_stands_for(void* node, void* original) {
  State& s = state();
  const CuptiApi* api = nullptr;
  {
    std::lock_guard lock(s.mutex);
    if (s.subscriber == nullptr) return;  // graph nodes are not seen
    api = s.active;
  }
  if (api == nullptr || api->graph_node_id == nullptr) return;
  uint64_t id = 0, original_id = 0;
  if (api->graph_node_id(static_cast<CUgraphNode>(node), &id) != CUPTI_SUCCESS ||
      api->graph_node_id(static_cast<CUgraphNode>(original), &original_id) != CUPTI_SUCCESS)
    return;
  std::lock_guard lock(s.nodes_mutex);
  if (auto it = s.nodes.find(original_id); it != s.nodes.end()) s.nodes[id] = it->second;
}

std::unique_ptr<KernelActivity> start_cupti_activity(std::string& why_not) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const CuptiApi* api = load(s, why_not);
  if (api == nullptr) return nullptr;
  if (s.collectors > 0 && s.active != api) {
    why_not = fmt::format("another libcupti ({}) is collecting", s.active->file);
    return nullptr;
  }
  if (s.collectors == 0) {
    for (CUpti_ActivityKind kind : kKinds) {
      const CUptiResult r = api->enable(kind);
      if (r != CUPTI_SUCCESS) {
        why_not = fmt::format("cuptiActivityEnable({}) failed: {}", int(kind), api->describe(r));
        for (CUpti_ActivityKind k : kKinds) (void)api->disable(k);
        return nullptr;
      }
    }
    s.active = api;
    subscribe(s, *api);
  }
  ++s.collectors;
  uint64_t origin = 0;
  (void)api->timestamp(&origin);
  const int tag = s.next_tag;
  s.next_tag = s.next_tag % ((1 << (64 - kTagShift)) - 1) + 1;
  return std::make_unique<CuptiActivity>(*api, tag, origin, s.graph_note);
}

}  // namespace hg::detail
