// The C calls of AMD's GPU monitoring libraries that the machine readings open with dlopen
// (machine_readings.cpp): AMD SMI (libamd_smi, ROCm 6 and later) and, as the fallback, ROCm SMI
// (librocm_smi64, in maintenance since ROCm 7). Declared here with the ABI of AMD's documented C
// API, without its headers (a build need not have them): enums as the 32-bit integers they are
// passed as, handles as void*, and the structs a reader reads through as bytes, with the
// offsets and sizes below. tests/device/amd_gpu_library_signatures.cpp checks every one against
// the libraries' own headers where these are installed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hg::amd_smi {

using Status = int;    // amdsmi_status_t
using Handle = void*;  // amdsmi_socket_handle, amdsmi_processor_handle
inline constexpr Status kSuccess = 0;
inline constexpr uint64_t kInitAmdGpus = uint64_t(1) << 1;  // AMDSMI_INIT_AMD_GPUS
inline constexpr uint32_t kProcessorAmdGpu = 1;             // AMDSMI_PROCESSOR_TYPE_AMD_GPU
inline constexpr uint32_t kMemoryVram = 0;                  // AMDSMI_MEM_TYPE_VRAM
inline constexpr uint32_t kTemperatureEdge = 0;             // AMDSMI_TEMPERATURE_TYPE_EDGE
inline constexpr uint32_t kTemperatureCurrent = 0;          // AMDSMI_TEMP_CURRENT
inline constexpr uint32_t kClockGfx = 0;                    // AMDSMI_CLK_TYPE_GFX
inline constexpr uint32_t kClockMemory = 4;                 // AMDSMI_CLK_TYPE_MEM

// The structs read through a buffer of kStructBytes: amdsmi_asic_info_t's market_name (a
// NUL-terminated name of at most kNameBytes), amdsmi_engine_usage_t's gfx_activity (percent)
// and amdsmi_clk_info_t's clk (MHz), each a field at offset 0.
inline constexpr size_t kStructBytes = 4096;
inline constexpr size_t kNameBytes = 256;

using Init = Status (*)(uint64_t flags);
using ShutDown = Status (*)();
using SocketHandles = Status (*)(uint32_t* count, Handle* sockets);
using ProcessorHandles = Status (*)(Handle socket, uint32_t* count, Handle* processors);
using ProcessorType = Status (*)(Handle processor, uint32_t* type);
using AsicInfo = Status (*)(Handle processor, void* asic_info);
using Activity = Status (*)(Handle processor, void* engine_usage);
// Bytes of memory of a type (VRAM).
using Memory = Status (*)(Handle processor, uint32_t type, uint64_t* bytes);
// The energy the GPU has used: a counter of `resolution` microjoules, at `timestamp` ns.
using EnergyCount = Status (*)(Handle processor, uint64_t* energy, float* resolution,
                               uint64_t* timestamp);
// Degrees Celsius (the header says millidegrees; the library divides by 1000).
using Temperature = Status (*)(Handle processor, uint32_t sensor, uint32_t metric,
                               int64_t* degrees);
using ClockInfo = Status (*)(Handle processor, uint32_t clock, void* clock_info);

}  // namespace hg::amd_smi

namespace hg::rocm_smi {

using Status = int;  // rsmi_status_t
inline constexpr Status kSuccess = 0;
inline constexpr uint32_t kMemoryVram = 0;          // RSMI_MEM_TYPE_VRAM
inline constexpr uint32_t kTemperatureEdge = 0;     // RSMI_TEMP_TYPE_EDGE
inline constexpr uint32_t kTemperatureCurrent = 0;  // RSMI_TEMP_CURRENT

using Init = Status (*)(uint64_t flags);
using ShutDown = Status (*)();
using DeviceCount = Status (*)(uint32_t* count);
using Name = Status (*)(uint32_t device, char* name, size_t length);
using Busy = Status (*)(uint32_t device, uint32_t* percent);
using Memory = Status (*)(uint32_t device, uint32_t type, uint64_t* bytes);
using PowerAverage = Status (*)(uint32_t device, uint32_t sensor, uint64_t* microwatts);
// MI300-class GPUs report the socket's current power instead of an average (ROCm SMI of ROCm 6).
using SocketPower = Status (*)(uint32_t device, uint64_t* microwatts);
using Temperature = Status (*)(uint32_t device, uint32_t sensor, uint32_t metric,
                               int64_t* millidegrees);

}  // namespace hg::rocm_smi
