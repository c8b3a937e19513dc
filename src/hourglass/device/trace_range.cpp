#include "hourglass/device/trace_range.h"

#if defined(HOURGLASS_HAS_GPU) && !defined(HOURGLASS_GPU_HIP)
#include <nvtx3/nvToolsExt.h>
#elif defined(HOURGLASS_GPU_HIP)
#include <dlfcn.h>

#include <initializer_list>
#endif

namespace hg {

#if defined(HOURGLASS_HAS_GPU) && !defined(HOURGLASS_GPU_HIP)

void push_trace_range(const char* name) { nvtxRangePushA(name); }
void pop_trace_range() { nvtxRangePop(); }

#elif defined(HOURGLASS_GPU_HIP)

namespace {

// ROCTX's two entry points, looked up once; null without a ROCTX library (ranges then do
// nothing). rocprofv3 (ROCm 6.2 and later) sees the ranges of rocprofiler-sdk's ROCTX library
// only, so that comes first; rocprof and rocprofv2 read roctracer's libroctx64. Versioned names
// before the unversioned ones, which only the -dev packages install.
struct Roctx {
  int (*push)(const char*) = nullptr;
  int (*pop)() = nullptr;
  Roctx() {
    void* lib = nullptr;
    for (const char* name : {"librocprofiler-sdk-roctx.so.1", "librocprofiler-sdk-roctx.so",
                             "libroctx64.so.4", "libroctx64.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
    }
    if (lib == nullptr) return;
    push = reinterpret_cast<int (*)(const char*)>(dlsym(lib, "roctxRangePushA"));
    pop = reinterpret_cast<int (*)()>(dlsym(lib, "roctxRangePop"));
    if (push == nullptr || pop == nullptr) push = nullptr, pop = nullptr;
  }
};

const Roctx& roctx() {
  static const Roctx r;
  return r;
}

}  // namespace

void push_trace_range(const char* name) {
  if (roctx().push != nullptr) roctx().push(name);
}
void pop_trace_range() {
  if (roctx().pop != nullptr) roctx().pop();
}

#else

void push_trace_range(const char*) {}
void pop_trace_range() {}

#endif

}  // namespace hg
