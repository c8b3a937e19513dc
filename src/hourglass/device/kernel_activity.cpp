#include "hourglass/device/kernel_activity.h"

#include <cxxabi.h>

#include <cstdlib>

namespace hg {

#if defined(HOURGLASS_HAS_GPU) && !defined(HOURGLASS_GPU_HIP)
namespace detail {
std::unique_ptr<KernelActivity> start_cupti_activity(std::string& why_not);  // gpu/..._cupti.cpp
}
std::unique_ptr<KernelActivity> start_kernel_activity(std::string& why_not) {
  return detail::start_cupti_activity(why_not);
}
#elif defined(HOURGLASS_GPU_HIP)
std::unique_ptr<KernelActivity> start_kernel_activity(std::string& why_not) {
  why_not = "HIP builds have no kernel-activity collector (rocprofiler is not wired in)";
  return nullptr;
}
#else
std::unique_ptr<KernelActivity> start_kernel_activity(std::string& why_not) {
  why_not = "this build has no GPU backend";
  return nullptr;
}
#endif

std::string demangle_kernel_name(const char* name) {
  if (name == nullptr) return "";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) {
    std::free(out);
    return name;
  }
  std::string s(out);
  std::free(out);
  return s;
}

namespace {

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The byte offset after the first `n` code points of `s`.
size_t prefix_bytes(const std::string& s, size_t n) {
  size_t i = 0;
  for (; i < s.size() && n > 0; --n) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return i;
}

}  // namespace

std::string short_kernel_name(const std::string& demangled, size_t max_chars) {
  std::string s = demangled;
  bool function = false;  // a demangled function: a return type may precede the name
  // The parameter list: the bracketed group that ends the name (" const" aside).
  if (s.size() > 6 && s.compare(s.size() - 6, 6, " const") == 0) s.resize(s.size() - 6);
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        if (i > 0) s.resize(i), function = true;  // "(anonymous namespace)" alone stays
        break;
      }
    }
  }
  // Template arguments collapsed, and the return type (what precedes the last space outside
  // brackets) dropped.
  std::string out;
  int depth = 0;
  size_t name_start = 0;
  for (char c : s) {
    if (c == '<') {
      if (depth++ == 0) out += "<…>";
      continue;
    }
    if (c == '>' && depth > 0) {
      --depth;
      continue;
    }
    if (depth > 0) continue;
    out += c;
  }
  depth = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '(') ++depth;
    if (out[i] == ')') --depth;
    if (out[i] == ' ' && depth == 0 && function) name_start = i + 1;
  }
  out = out.substr(name_start);
  if (out.empty()) out = demangled;
  // Leading namespaces dropped while too long, then the end cut.
  while (code_points(out) > max_chars) {
    const size_t colons = out.find("::");
    if (colons == std::string::npos || colons + 2 >= out.size()) break;
    out = out.substr(colons + 2);
  }
  if (max_chars > 0 && code_points(out) > max_chars)
    out = out.substr(0, prefix_bytes(out, max_chars - 1)) + "…";
  return out;
}

}  // namespace hg
