#include "hourglass/device/kernel_activity.h"

#include <cxxabi.h>

#include <cstdlib>

namespace hg {

#if defined(HOURGLASS_HAS_GPU) && !defined(HOURGLASS_GPU_HIP)
namespace detail {
std::unique_ptr<KernelActivity> start_cupti_activity(std::string& why_not);  // gpu/..._cupti.cpp
void cupti_graph_node_stands_for(void* node, void* original);                // the same
}  // namespace detail
std::unique_ptr<KernelActivity> start_kernel_activity(std::string& why_not) {
  return detail::start_cupti_activity(why_not);
}
void graph_node_stands_for(void* node, void* original) {
  detail::cupti_graph_node_stands_for(node, original);
}
#elif defined(HOURGLASS_GPU_HIP)
std::unique_ptr<KernelActivity> start_kernel_activity(std::string& why_not) {
  why_not = "HIP builds have no kernel-activity collector (rocprofiler is not wired in)";
  return nullptr;
}
void graph_node_stands_for(void*, void*) {}
#else
std::unique_ptr<KernelActivity> start_kernel_activity(std::string& why_not) {
  why_not = "this build has no GPU backend";
  return nullptr;
}
void graph_node_stands_for(void*, void*) {}
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
  // The return type: what precedes the last space outside brackets.
  int depth = 0;
  size_t name_start = 0;
  for (size_t i = 0; i < s.size() && function; ++i) {
    if (s[i] == '(' || s[i] == '<') ++depth;
    if ((s[i] == ')' || s[i] == '>') && depth > 0) --depth;
    if (s[i] == ' ' && depth == 0) name_start = i + 1;
  }
  s = s.substr(name_start);
  if (s.empty()) s = demangled;
  if (code_points(s) <= max_chars) return s;
  // Too long: template arguments collapsed; a generic wrapper (CUTLASS's Kernel<Op>) is named by
  // its first argument instead.
  std::string out, first_argument;
  depth = 0;
  bool in_first = false;
  for (char c : s) {
    if (c == '<') {
      if (depth++ == 0) {
        out += "<…>";
        in_first = first_argument.empty();
        continue;
      }
    } else if (c == '>' && depth > 0) {
      if (--depth == 0) {
        in_first = false;
        continue;
      }
    } else if (c == ',' && depth == 1) {
      in_first = false;
    }
    if (depth == 0) out += c;
    if (in_first) first_argument += c;
  }
  const size_t last = out.rfind("::");
  const std::string base = out.substr(last == std::string::npos ? 0 : last + 2);
  if ((base == "Kernel<…>" || base == "Kernel2<…>" || base == "device_kernel<…>") &&
      !first_argument.empty())
    return short_kernel_name(first_argument, max_chars);
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
