#include "hourglass/base/process_exit.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hourglass/base/log.h"

#if defined(__SANITIZE_ADDRESS__)
#define HG_LEAK_CHECK_AT_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define HG_LEAK_CHECK_AT_EXIT 1
#endif
#endif

namespace hg {

namespace {
std::atomic<bool> g_orderly{false};
}  // namespace

void require_orderly_exit() { g_orderly.store(true); }

void exit_without_teardown(int code) {
#ifdef HG_LEAK_CHECK_AT_EXIT
  return;
#endif
  if (g_orderly.load()) return;
  const char* v = std::getenv("HOURGLASS_FAST_EXIT");
  if (v != nullptr && std::strcmp(v, "0") == 0) return;
  flush_logs();
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace hg
