#include "hourglass/base/environment.h"

#include <cstdlib>
#include <cstring>

namespace hg::env {

const char* get(const char* name) { return std::getenv(name); }

int level(const char* name, int fallback) {
  const char* v = get(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' ? int(n) : fallback;
}

bool on_unless_zero(const char* name) {
  const char* v = get(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace hg::env
