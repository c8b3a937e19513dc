#include "hourglass/backend/cpu/cpu_features.h"

#include <dnnl.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace hg::cpu {
namespace {

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

// The first "model name" and "flags" lines of /proc/cpuinfo.
void read_cpuinfo(std::string& model, std::set<std::string>& flags) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool have_flags = false;
  while (std::getline(in, line) && (model.empty() || !have_flags)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = value;
    if (key == "flags" && !have_flags) {
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.insert(w);
      have_flags = true;
    }
  }
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
    std::set<std::string> flags;
    read_cpuinfo(f.model, flags);
    f.avx2 = flags.count("avx2") != 0;
    f.avx512 = flags.count("avx512f") != 0;
    f.avx512_bf16 = flags.count("avx512_bf16") != 0;
    f.avx512_vnni = flags.count("avx512_vnni") != 0;
    f.avx_vnni = flags.count("avx_vnni") != 0;
    f.amx_bf16 = flags.count("amx_bf16") != 0;
    f.amx_int8 = flags.count("amx_int8") != 0;
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    f.onednn_isa = isa_name(isa);
    // avx512_core_bf16's feature bits are a subset of AMX's.
    const unsigned bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
    const unsigned amx = unsigned(dnnl::cpu_isa::avx512_core_amx);
    f.bf16_native = (unsigned(isa) & bf16) == bf16;
    f.amx = (unsigned(isa) & amx) == amx;
    return f;
  }();
  return features;
}

std::vector<std::string> matrix_units(const CpuFeatures& f) {
  std::vector<std::string> units;
  if (f.amx_bf16) units.push_back("AMX-BF16");
  if (f.amx_int8) units.push_back("AMX-INT8");
  if (f.avx512_bf16) units.push_back("AVX-512 BF16");
  if (f.avx512_vnni) units.push_back("AVX-512 VNNI");
  if (f.avx_vnni) units.push_back("AVX-VNNI");
  if (units.empty() && f.avx512) units.push_back("AVX-512 only");
  if (units.empty() && f.avx2) units.push_back("AVX2 only");
  if (units.empty()) units.push_back("no AVX2");
  return units;
}

std::vector<std::string> fast_precisions(const CpuFeatures& f) {
  if (f.amx) return {"fp32", "bf16"};
  return {"fp32"};
}

std::string precisions_text(const CpuFeatures& f) {
  if (f.amx) return "fp32 and bf16 (AMX)";
  if (f.bf16_native)
    return "fp32; bf16 runs on AVX-512 BF16, faster than fp32 on some CPUs and slower on others "
           "(hourglass doctor times both)";
  return "fp32 (bf16 needs AVX-512 BF16 or AMX)";
}

}  // namespace hg::cpu
