// What a device can do at most, for the op profiler's achieved rates (obs/op_profile_report.h):
// dense math throughput per precision and memory bandwidth, derived from the device's
// properties (SM count, SM clock, memory clock and bus width: gpu/device_info.h) and a table of
// math per SM per clock for each architecture hourglass knows. Unknown values are 0 (the table
// shows "—"); the CPU has none.
#pragma once

#include <cstdint>
#include <string>

#include "hourglass/device/device.h"

namespace hg {

// The math an op's FLOPs run as: tensor cores for BF16/F16/TF32, the FP32/FP64 pipes otherwise.
enum class MathPrecision : uint8_t { None, F64, F32, TF32, BF16, F16 };
const char* precision_name(MathPrecision p);

struct DevicePeaks {
  double bf16_tflops = 0, f16_tflops = 0, tf32_tflops = 0, f32_tflops = 0, f64_tflops = 0;
  double memory_gbps = 0;  // GB/s, 10^9 bytes
  double tflops(MathPrecision p) const;
};

// `arch` "sm_90"; `clock_mhz` the peak SM clock; `memory_clock_mhz` the memory clock as the
// CUDA runtime reports it (double data rate: two transfers a clock); bus width in bits.
DevicePeaks device_peaks(const std::string& arch, int multiprocessors, int clock_mhz,
                         int memory_clock_mhz, int memory_bus_bits);

// The peaks of `device` (a GPU's properties read through the runtime; nothing for the CPU or a
// GPU that cannot be queried). Never throws.
DevicePeaks peaks_of(Device device);

}  // namespace hg
