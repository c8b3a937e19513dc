#include "hourglass/device/device_peaks.h"

#ifdef HOURGLASS_HAS_GPU
#include "hourglass/device/gpu/device_info.h"
#endif

namespace hg {

const char* precision_name(MathPrecision p) {
  switch (p) {
    case MathPrecision::F64: return "f64";
    case MathPrecision::F32: return "f32";
    case MathPrecision::TF32: return "tf32";
    case MathPrecision::BF16: return "bf16";
    case MathPrecision::F16: return "f16";
    case MathPrecision::None: break;
  }
  return "";
}

double DevicePeaks::tflops(MathPrecision p) const {
  switch (p) {
    case MathPrecision::F64: return f64_tflops;
    case MathPrecision::F32: return f32_tflops;
    case MathPrecision::TF32: return tf32_tflops;
    case MathPrecision::BF16: return bf16_tflops;
    case MathPrecision::F16: return f16_tflops;
    case MathPrecision::None: break;
  }
  return 0;
}

namespace {

// Dense FLOPs per SM per clock (a fused multiply-add counts two): NVIDIA's datasheet peaks
// divided by SMs x the peak SM clock the runtime reports, so that the reported clock gives the
// datasheet's number back. sm_90 (H100/H200 SXM: 989.4 dense bf16/f16, 494.7 tf32, 66.9 f32,
// 66.9 f64 tensor TFLOP/s at 132 SMs x 1.98 GHz); sm_80 (A100: 312 bf16/f16, 156 tf32, 19.5
// f32, 19.5 f64 tensor at 108 SMs x 1.41 GHz). f64 is the FP64 tensor-core rate. Other
// architectures: unknown (0).
struct ArchRates {
  const char* arch;
  double bf16, f16, tf32, f32, f64;
};
constexpr ArchRates kRates[] = {
    {"sm_90", 3785.6, 3785.6, 1892.8, 256, 256},
    {"sm_80", 2048, 2048, 1024, 128, 128},
};

}  // namespace

DevicePeaks device_peaks(const std::string& arch, int multiprocessors, int clock_mhz,
                         int memory_clock_mhz, int memory_bus_bits) {
  DevicePeaks p;
  if (memory_clock_mhz > 0 && memory_bus_bits > 0)
    p.memory_gbps = 2.0 * memory_clock_mhz * 1e6 * (memory_bus_bits / 8.0) / 1e9;
  if (multiprocessors <= 0 || clock_mhz <= 0) return p;
  const double sm_clocks = double(multiprocessors) * clock_mhz * 1e6 / 1e12;  // -> TFLOP/s
  for (const ArchRates& r : kRates) {
    if (arch != r.arch) continue;
    p.bf16_tflops = r.bf16 * sm_clocks;
    p.f16_tflops = r.f16 * sm_clocks;
    p.tf32_tflops = r.tf32 * sm_clocks;
    p.f32_tflops = r.f32 * sm_clocks;
    p.f64_tflops = r.f64 * sm_clocks;
  }
  return p;
}

DevicePeaks peaks_of(Device device) {
#ifdef HOURGLASS_HAS_GPU
  if (!device.is_gpu()) return {};
  try {
    const gpu::GpuDeviceInfo d = gpu::device_properties(device.index);
    return device_peaks(d.arch, d.multiprocessors, d.clock_mhz, d.memory_clock_mhz,
                        d.memory_bus_bits);
  } catch (...) {
    return {};
  }
#else
  (void)device;
  return {};
#endif
}

}  // namespace hg
