// The device's own record of the work it ran, for the op profiler (ops/op_profile.h): every
// kernel, copy and fill with its start and end on the device and the op that issued it. CUDA
// builds read it through CUPTI's activity API (device/gpu/kernel_activity_cupti.cpp), with
// libcupti opened by dlopen at run time (never linked: a machine without it still runs, and the
// profiler falls back to its event marks); the op is CUPTI's external correlation id, pushed
// around each op on the host, which costs no device work. HIP and CPU builds have no collector
// (rocprofiler is not wired in).
//
// Graph replays: a replayed graph's kernels carry the id of their graph node, not of an op's
// launch. Where the collector sees graph nodes being made (CUPTI's resource callbacks:
// graph_nodes()), a node made while an op is pushed (a launch during stream capture) is named
// by that op, and a node cloned from it (instantiation) by the same op; a record of a node
// takes its op_id from there, and `replay` from what push_replay() named around the graph's
// launch. CUPTI takes one callback subscriber per process: under another tool (nsys) graph
// nodes are not seen, and graph_note() says why. HOURGLASS_CUPTI_LIBRARY names another library file
// to open (the tests' fake, tests/device/fakes/fake_cupti.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hg {

enum class ActivityKind : uint8_t { Kernel, Memcpy, Memset };

struct KernelRecord {
  ActivityKind kind = ActivityKind::Kernel;
  std::string name;     // demangled ("void cudnn::conv<float>(...)"); "memcpy HtoD", "memset"
  uint64_t op_id = 0;   // what push_op() named around its launch (a graph node's: around the
                        // node's making); 0: launched outside any op
  uint64_t replay = 0;  // what push_replay() named around the graph launch that ran it; 0: none
  double start_us = 0, end_us = 0;  // on the device, since the collector started
  uint64_t bytes = 0;               // copies and fills
  uint32_t stream = 0;
};

class KernelActivity {
 public:
  virtual ~KernelActivity() = default;
  // Names the work the calling thread issues from now on `op_id` (> 0), until pop_op(); nests.
  // Host-side only: a push onto a thread-local stack of the library.
  virtual void push_op(uint64_t op_id) = 0;
  virtual void pop_op() = 0;
  // Names the graph launches the calling thread issues from now on `replay_id` (> 0), until
  // pop_replay(): their records carry it in `replay`.
  virtual void push_replay(uint64_t replay_id) = 0;
  virtual void pop_replay() = 0;
  // Whether graph nodes made from now on are named by the op pushed at their making (see above).
  virtual bool graph_nodes() const = 0;
  // Why not, when graph_nodes() is false ("" when it is true).
  virtual const std::string& graph_note() const = 0;
  // Every record delivered since the collector started, once each (call after the device has
  // run the work: the library's buffers are flushed here).
  virtual std::vector<KernelRecord> collect() = 0;
  // What delivers the records ("CUPTI 26 (libcupti.so.13)").
  virtual std::string source() const = 0;
};

// Starts collecting for this process's CUDA devices; null when this build has no collector or
// the library cannot be opened or refuses (`why_not` says which). Collectors may overlap (each
// receives the records of its own ops; records outside any op go to the first to collect).
std::unique_ptr<KernelActivity> start_kernel_activity(std::string& why_not);

// A graph node added after its graph was captured, to do another node's work (gpu/graph.cpp
// turns small memset nodes into kernel nodes): its records are named by that node's op. Does
// nothing where graph nodes are not seen. `node` and `original` are the runtime's graph nodes.
void graph_node_stands_for(void* node, void* original);

// "_Z3fooIfEvPT_i" -> "void foo<float>(float*, int)"; names that are not mangled C++ (extern "C"
// kernels, cuBLAS's "sm90_xmma_gemm_...") come back as they are.
std::string demangle_kernel_name(const char* name);
// A demangled name made short for a table: no return type, parameter list or template
// arguments ("cudnn::detail::wgrad_alg0_engine<...>"), then, when still longer than
// `max_chars`, the leading namespaces dropped and the end cut ("...").
std::string short_kernel_name(const std::string& demangled, size_t max_chars);

}  // namespace hg
