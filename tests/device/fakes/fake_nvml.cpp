// A stand-in for libnvidia-ml.so.1 with two GPUs of fixed readings, loaded by the machine-readings
// tests through HOURGLASS_NVML_LIBRARY. It exports the C calls hourglass looks up, with NVML's
// documented signatures and units (memory in bytes, power in milliwatts).
#include <cstring>

extern "C" {

struct FakeNvmlUtilization {
  unsigned gpu, memory;
};
struct FakeNvmlMemory {
  unsigned long long total, free, used;
};

int nvmlInit_v2() { return 0; }
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = reinterpret_cast<void*>(static_cast<unsigned long>(index) + 1);
  return 0;
}
static unsigned which(void* device) {
  return unsigned(reinterpret_cast<unsigned long>(device) - 1);
}
int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  std::strncpy(name, which(device) == 0 ? "Fake GPU 0" : "Fake GPU 1", length);
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* device, FakeNvmlUtilization* u) {
  u->gpu = 40 + 50 * which(device);  // 40 and 90
  u->memory = 10;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, FakeNvmlMemory* m) {
  m->total = 80ull << 30;
  m->used = (which(device) + 1) * (8ull << 30);
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetPowerUsage(void*, unsigned* milliwatts) {
  *milliwatts = 312500;
  return 0;
}
int nvmlDeviceGetTemperature(void*, int sensor, unsigned* celsius) {
  if (sensor != 0) return 3;  // NVML_ERROR_NOT_SUPPORTED
  *celsius = 47;
  return 0;
}
int nvmlDeviceGetClockInfo(void*, int type, unsigned* mhz) {
  if (type == 1)
    *mhz = 1980;  // SM
  else if (type == 2)
    *mhz = 2619;  // memory
  else
    return 3;
  return 0;
}

}  // extern "C"
