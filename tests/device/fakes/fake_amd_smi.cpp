// A stand-in for libamd_smi.so with one socket holding a CPU and a GPU of fixed readings, loaded
// by the machine-readings tests through HOURGLASS_AMD_SMI_LIBRARY. It exports the C calls
// hourglass looks up, with AMD SMI's documented signatures and units (bytes, degrees Celsius,
// MHz, an energy counter of microjoule steps with nanosecond timestamps) and the leading fields
// of its structs that hourglass reads (market_name, gfx_activity, clk).
#include <cstdint>
#include <cstring>

namespace {
int g_gpu = 0, g_cpu = 0;  // the processors' handles point here
int g_socket = 0;
uint64_t g_energy = 0, g_timestamp_ns = 0;
}  // namespace

extern "C" {

int amdsmi_init(uint64_t flags) { return flags == (uint64_t(1) << 1) ? 0 : 1; }
int amdsmi_shut_down() { return 0; }
int amdsmi_get_socket_handles(uint32_t* count, void** sockets) {
  if (sockets != nullptr && *count >= 1) sockets[0] = &g_socket;
  *count = 1;
  return 0;
}
int amdsmi_get_processor_handles(void* socket, uint32_t* count, void** processors) {
  if (socket != &g_socket) return 2;
  if (processors != nullptr && *count >= 2) {
    processors[0] = &g_cpu;
    processors[1] = &g_gpu;
  }
  *count = 2;
  return 0;
}
int amdsmi_get_processor_type(void* processor, uint32_t* type) {
  *type = processor == &g_gpu ? 1 : 2;  // AMDSMI_PROCESSOR_TYPE_AMD_GPU, _AMD_CPU
  return 0;
}
int amdsmi_get_gpu_asic_info(void* processor, void* info) {
  if (processor != &g_gpu) return 2;
  std::strcpy(static_cast<char*>(info), "Fake Instinct MI355X");
  return 0;
}
int amdsmi_get_gpu_activity(void* processor, void* usage) {
  if (processor != &g_gpu) return 2;
  const uint32_t gfx_activity = 64;
  std::memcpy(usage, &gfx_activity, sizeof gfx_activity);
  return 0;
}
int amdsmi_get_gpu_memory_total(void*, uint32_t type, uint64_t* bytes) {
  if (type != 0) return 2;
  *bytes = 288ull << 30;
  return 0;
}
int amdsmi_get_gpu_memory_usage(void*, uint32_t type, uint64_t* bytes) {
  if (type != 0) return 2;
  *bytes = 36ull << 30;
  return 0;
}
// 600 J over each second between two calls: 600 W.
int amdsmi_get_energy_count(void*, uint64_t* energy, float* resolution, uint64_t* timestamp) {
  g_energy += 40000000;  // steps of 15 uJ
  g_timestamp_ns += 1000000000;
  *energy = g_energy;
  *resolution = 15.0f;
  *timestamp = g_timestamp_ns;
  return 0;
}
int amdsmi_get_temp_metric(void*, uint32_t sensor, uint32_t metric, int64_t* degrees) {
  if (sensor != 0 || metric != 0) return 2;
  *degrees = 48;
  return 0;
}
int amdsmi_get_clock_info(void*, uint32_t clock, void* info) {
  uint32_t mhz = 0;
  if (clock == 0)
    mhz = 2400;  // AMDSMI_CLK_TYPE_GFX
  else if (clock == 4)
    mhz = 1900;  // AMDSMI_CLK_TYPE_MEM
  else
    return 2;
  std::memcpy(info, &mhz, sizeof mhz);
  return 0;
}

}  // extern "C"
