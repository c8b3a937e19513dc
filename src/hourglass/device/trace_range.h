// Named ranges on the timelines of the vendors' profilers, so that Nsight Systems (nsys) and
// rocprofv3 show a run's phases (forward, backward, update, evaluate, checkpoint, ...) beside
// the kernels: NVTX in CUDA builds (its header-only API, which loads a profiler's injection
// library named by NVTX_INJECTION64_PATH on the first call), ROCTX in HIP builds (opened at run
// time: rocprofiler-sdk's librocprofiler-sdk-roctx, which rocprofv3 reads, else roctracer's
// libroctx64; without either ranges do nothing), nothing in CPU builds. With no profiler
// attached a range costs a call through a function pointer and a branch.
#pragma once

namespace hg {

// Opens a range named `name` (a string that lives for the program, e.g. a literal) on the
// calling thread; ranges nest.
void push_trace_range(const char* name);
// Closes the thread's innermost open range.
void pop_trace_range();

// A range for the lifetime of a scope.
class TraceRange {
 public:
  explicit TraceRange(const char* name) { push_trace_range(name); }
  ~TraceRange() { pop_trace_range(); }
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;
};

}  // namespace hg
