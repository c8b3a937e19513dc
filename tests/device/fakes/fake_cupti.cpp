// A stand-in for libcupti, which the op profiler's kernel-activity collector
// (device/gpu/kernel_activity_cupti.cpp) opens through HOURGLASS_CUPTI_LIBRARY in the tests. It
// exports the activity calls the collector looks up, with CUPTI's signatures (cupti.h), and
// delivers the records a test asks for: fake_cupti_launch(name, ns) stands for one launch on the
// calling thread (an API call with its correlation id, preceded by an external-correlation record
// for the id pushed on this thread, if any, and a kernel, copy or fill of `ns` nanoseconds on a
// fake device clock). Records reach the collector through its buffer callbacks when it flushes,
// split over two buffers (so a kernel's external-correlation record can come in another buffer).
// Graphs: the callback API (cuptiSubscribe, cuptiEnableCallback, cuptiGetGraphNodeId, whose node
// handles are the node ids themselves); fake_cupti_graph_node(node) stands for a launch that
// stream capture turns into node `node` (the resource callback GRAPHNODE_CREATED on the calling
// thread, no record), fake_cupti_graph_clone(original, clone) for instantiation's copy
// (GRAPHNODE_CLONED), fake_cupti_graph_launch(nodes, n, ns) for one graph launch: one API call,
// with the external id pushed on this thread, and a kernel per node carrying its graphNodeId.
// FAKE_CUPTI_FAIL_ENABLE=1 makes cuptiActivityEnable fail, FAKE_CUPTI_FAIL_SUBSCRIBE=1
// cuptiSubscribe (as when another tool holds CUPTI's one subscriber).
#include <cupti.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Pending {
  CUpti_ActivityKind kind;
  std::string name;  // kernels
  uint64_t bytes, start, end;
  uint32_t correlation;
  uint64_t external;        // 0: none pushed
  uint64_t graph_node = 0;  // 0: not a graph's
};

std::mutex g_mutex;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
bool g_enabled[64] = {};
std::vector<Pending> g_pending;
std::vector<std::string*> g_names;  // kernel names, alive for the process as CUPTI's are
uint64_t g_clock = 1'000'000;       // ns
uint32_t g_correlation = 0;
thread_local std::vector<uint64_t> t_external;
CUpti_CallbackFunc g_callback = nullptr;  // the subscriber's
void* g_userdata = nullptr;
bool g_subscribed = false;
bool g_callback_enabled[2] = {};  // GRAPHNODE_CREATED, GRAPHNODE_CLONED

int callback_slot(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return -1;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) return 0;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return 1;
  return -1;
}

// Calls the subscriber as CUPTI does for a graph node's callback `cbid`.
void node_callback(CUpti_CallbackId cbid, uint64_t node, uint64_t original) {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  {
    std::lock_guard lock(g_mutex);
    const int slot = callback_slot(CUPTI_CB_DOMAIN_RESOURCE, cbid);
    if (!g_subscribed || slot < 0 || !g_callback_enabled[slot]) return;
    callback = g_callback;
    userdata = g_userdata;
  }
  CUpti_GraphData graph{};
  graph.node = reinterpret_cast<CUgraphNode>(node);
  graph.originalNode = reinterpret_cast<CUgraphNode>(original);
  CUpti_ResourceData resource{};
  resource.resourceDescriptor = &graph;
  callback(userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &resource);
}

// Each record in a slot of this many bytes (the collector reads them only through
// cuptiActivityGetNextRecord, which walks the slots).
constexpr size_t kSlot = 512;
static_assert(sizeof(CUpti_ActivityKernel10) <= kSlot && sizeof(CUpti_ActivityMemcpy6) <= kSlot &&
              sizeof(CUpti_ActivityMemset4) <= kSlot &&
              sizeof(CUpti_ActivityExternalCorrelation) <= kSlot);

void write(uint8_t* slot, const Pending& p, bool external_record) {
  std::memset(slot, 0, kSlot);
  if (external_record) {
    auto* e = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(slot);
    e->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e->externalId = p.external;
    e->correlationId = p.correlation;
    return;
  }
  if (p.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
    auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(slot);
    k->kind = p.kind;
    k->start = p.start, k->end = p.end;
    k->correlationId = p.correlation;
    k->graphNodeId = p.graph_node;
    k->streamId = 7;
    std::string* name = new std::string(p.name);
    g_names.push_back(name);
    k->name = name->c_str();
  } else if (p.kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
    auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(slot);
    m->kind = p.kind;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m->bytes = p.bytes;
    m->start = p.start, m->end = p.end;
    m->correlationId = p.correlation;
    m->streamId = 7;
  } else {
    auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(slot);
    m->kind = p.kind;
    m->bytes = p.bytes;
    m->start = p.start, m->end = p.end;
    m->correlationId = p.correlation;
    m->streamId = 7;
  }
}

// Hands `records` (slot images) to the collector in one buffer.
void deliver(const std::vector<std::vector<uint8_t>>& records) {
  if (records.empty()) return;
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buffer, &size, &max_records);
  size_t used = 0;
  for (const auto& r : records) {
    if (used + kSlot > size) break;
    std::memcpy(buffer + used, r.data(), kSlot);
    used += kSlot;
  }
  g_complete(nullptr, 0, buffer, size, used);
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  std::lock_guard lock(g_mutex);
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  const char* fail = std::getenv("FAKE_CUPTI_FAIL_ENABLE");
  if (fail != nullptr && *fail == '1') return CUPTI_ERROR_NOT_INITIALIZED;
  std::lock_guard lock(g_mutex);
  if (unsigned(kind) < 64) g_enabled[kind] = true;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard lock(g_mutex);
  if (unsigned(kind) < 64) g_enabled[kind] = false;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  std::vector<std::vector<uint8_t>> first, second;
  {
    std::lock_guard lock(g_mutex);
    if (g_request == nullptr || g_complete == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
    // The external-correlation records in the first buffer, the work in the second.
    for (const Pending& p : g_pending) {
      if (p.external != 0 && g_enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]) {
        first.emplace_back(kSlot);
        write(first.back().data(), p, true);
      }
      if (!g_enabled[p.kind]) continue;
      second.emplace_back(kSlot);
      write(second.back().data(), p, false);
    }
    g_pending.clear();
  }
  deliver(first);
  deliver(second);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                CUpti_Activity** record) {
  uint8_t* next = *record == nullptr ? buffer : reinterpret_cast<uint8_t*>(*record) + kSlot;
  if (next + kSlot > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                            uint64_t id) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return CUPTI_ERROR_INVALID_PARAMETER;
  t_external.push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                           uint64_t* last) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (t_external.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last != nullptr) *last = t_external.back();
  t_external.pop_back();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  std::lock_guard lock(g_mutex);
  *timestamp = g_clock;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fake)";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = 99;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  const char* fail = std::getenv("FAKE_CUPTI_FAIL_SUBSCRIBE");
  std::lock_guard lock(g_mutex);
  if ((fail != nullptr && *fail == '1') || g_subscribed)
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_subscribed = true;
  g_callback = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscribed);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard lock(g_mutex);
  if (!g_subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&g_subscribed))
    return CUPTI_ERROR_INVALID_PARAMETER;
  g_subscribed = false;
  g_callback = nullptr;
  g_callback_enabled[0] = g_callback_enabled[1] = false;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard lock(g_mutex);
  const int slot = callback_slot(domain, cbid);
  if (!g_subscribed || slot < 0) return CUPTI_ERROR_INVALID_PARAMETER;
  g_callback_enabled[slot] = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphNodeId(CUgraphNode node, uint64_t* id) {
  if (node == nullptr || id == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = reinterpret_cast<uint64_t>(node);
  return CUPTI_SUCCESS;
}

// The test's side: one launch of `ns` nanoseconds (after a gap of `gap_ns` on the device clock).
// `kind` 0: a kernel named `name` (mangled or not); 1: a host-to-device copy of `bytes`; 2: a
// fill of `bytes`.
void fake_cupti_launch(int kind, const char* name, uint64_t ns, uint64_t gap_ns, uint64_t bytes) {
  std::lock_guard lock(g_mutex);
  Pending p;
  p.kind = kind == 0   ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
           : kind == 1 ? CUPTI_ACTIVITY_KIND_MEMCPY
                       : CUPTI_ACTIVITY_KIND_MEMSET;
  p.name = name != nullptr ? name : "";
  p.bytes = bytes;
  g_clock += gap_ns;
  p.start = g_clock;
  g_clock += ns;
  p.end = g_clock;
  p.correlation = ++g_correlation;
  p.external = t_external.empty() ? 0 : t_external.back();
  g_pending.push_back(std::move(p));
}

// Graphs (see the top): a node made by capture, a node cloned, and one launch of the nodes, each
// running a kernel `ns` long (named "graph_kernel").
void fake_cupti_graph_node(uint64_t node) {
  node_callback(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, node, 0);
}

void fake_cupti_graph_clone(uint64_t original, uint64_t clone) {
  node_callback(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, clone, original);
}

void fake_cupti_graph_launch(const uint64_t* nodes, int count, uint64_t ns) {
  std::lock_guard lock(g_mutex);
  const uint32_t correlation = ++g_correlation;  // the launch's API call
  const uint64_t external = t_external.empty() ? 0 : t_external.back();
  for (int i = 0; i < count; ++i) {
    Pending p;
    p.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    p.name = "graph_kernel";
    p.bytes = 0;
    g_clock += 1000;
    p.start = g_clock;
    g_clock += ns;
    p.end = g_clock;
    p.correlation = correlation;
    p.external = external;
    p.graph_node = nodes[i];
    g_pending.push_back(std::move(p));
  }
}

// Whether a subscriber holds both graph-node callbacks now.
int fake_cupti_subscribed() {
  std::lock_guard lock(g_mutex);
  return g_subscribed && g_callback_enabled[0] && g_callback_enabled[1] ? 1 : 0;
}

// Whether the collector has `kind` (a CUpti_ActivityKind) enabled now.
int fake_cupti_enabled(int kind) {
  std::lock_guard lock(g_mutex);
  return kind >= 0 && kind < 64 && g_enabled[kind] ? 1 : 0;
}

}  // extern "C"
