// A stand-in for librocm_smi64.so with one GPU of fixed readings, loaded by the machine-readings
// tests through HOURGLASS_ROCM_SMI_LIBRARY. It exports the C calls hourglass looks up, with ROCm
// SMI's documented signatures and units (bytes, microwatts, millidegrees).
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {

int rsmi_init(uint64_t) { return 0; }
int rsmi_shut_down() { return 0; }
int rsmi_num_monitor_devices(uint32_t* n) {
  *n = 1;
  return 0;
}
int rsmi_dev_name_get(uint32_t, char* name, size_t length) {
  std::strncpy(name, "Fake Instinct", length);
  return 0;
}
int rsmi_dev_busy_percent_get(uint32_t, uint32_t* busy) {
  *busy = 73;
  return 0;
}
int rsmi_dev_memory_total_get(uint32_t, uint32_t type, uint64_t* bytes) {
  if (type != 0) return 2;
  *bytes = 192ull << 30;
  return 0;
}
int rsmi_dev_memory_usage_get(uint32_t, uint32_t type, uint64_t* bytes) {
  if (type != 0) return 2;
  *bytes = 24ull << 30;
  return 0;
}
int rsmi_dev_power_ave_get(uint32_t, uint32_t, uint64_t*) { return 2; }  // as on MI300
int rsmi_dev_current_socket_power_get(uint32_t, uint64_t* microwatts) {
  *microwatts = 550000000;
  return 0;
}
int rsmi_dev_temp_metric_get(uint32_t, uint32_t sensor, uint32_t metric, int64_t* millidegrees) {
  if (sensor != 0 || metric != 0) return 2;
  *millidegrees = 51500;
  return 0;
}

}  // extern "C"
