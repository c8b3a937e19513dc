// What the CPU offers the CPU backend: its model, its matrix units (AMX, AVX-512 BF16, the VNNI
// int8 dot products), the instruction set oneDNN dispatches to, and so which precisions run
// natively on it. For `hourglass info` and `doctor`, and for the refusal of bf16 where it would be
// emulated (CpuBackend::compute_dtype_problem).
#pragma once

#include <string>
#include <vector>

namespace hg::cpu {

struct CpuFeatures {
  std::string model;       // /proc/cpuinfo's "model name" ("" where unknown)
  std::string onednn_isa;  // the ISA oneDNN dispatches to, as its enum names it
  bool avx2 = false, avx512 = false, avx512_bf16 = false, avx512_vnni = false, avx_vnni = false,
       amx_bf16 = false, amx_int8 = false;
  bool bf16_native = false;  // oneDNN runs bf16 on the CPU's own bf16 instructions
  bool amx = false;          // ... and on AMX's tiles
};

// Read once per process.
const CpuFeatures& cpu_features();

// The matrix units by name, strongest first: "AMX-BF16, AMX-INT8, AVX-512 BF16, AVX-512 VNNI",
// "AVX2 only", ...
std::vector<std::string> matrix_units(const CpuFeatures& f);

// The precisions that run fast for certain: fp32, and bf16 on AMX. bf16 on AVX-512 BF16 alone
// runs natively but is not always faster than fp32 (oneDNN 2.6's bf16 convolutions train CIFAR
// ResNet-18 at 1.7x fp32's speed on a Zen 4, at 0.67x on an Intel Xeon without AMX), which
// `hourglass doctor` measures; the text says so.
std::vector<std::string> fast_precisions(const CpuFeatures& f);
std::string precisions_text(const CpuFeatures& f);

}  // namespace hg::cpu
