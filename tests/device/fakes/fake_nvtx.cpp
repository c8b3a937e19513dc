// A stand-in for a profiler's NVTX injection library (what Nsight Systems loads through
// NVTX_INJECTION64_PATH): it attaches to NVTX's push and pop entry points and appends one line
// per call to the file FAKE_NVTX_LOG names ("push NAME", "pop"), so a test can see the ranges a
// profiler would show.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

std::mutex g_mutex;

void append(const char* what, const char* name) {
  const char* path = std::getenv("FAKE_NVTX_LOG");
  if (path == nullptr) return;
  std::lock_guard lock(g_mutex);
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s%s%s\n", what, name ? " " : "", name ? name : "");
    std::fclose(f);
  }
}

int NVTX_API range_push(const char* name) {
  append("push", name);
  return 0;
}

int NVTX_API range_pop() {
  append("pop", nullptr);
  return 0;
}

}  // namespace

extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || table == nullptr ||
      size <= NVTX_CBID_CORE_RangePop)
    return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&range_push);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&range_pop);
  return 1;
}
