// Where a tensor lives: the CPU or GPU number N. Parsed from "cpu", "gpu", "gpu:1".
#pragma once

#include <cstdint>
#include <string>

namespace hg {

enum class DeviceType : uint8_t { CPU, GPU };

// GPUs per process that the per-device tables (allocators, library handles, plans) have room
// for; a higher index is refused where a device is first selected (gpu/runtime.cpp).
inline constexpr int kMaxDevices = 64;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device gpu(int index = 0) { return {DeviceType::GPU, index}; }
  // Throws InvalidInput naming the text when it is not "cpu", "gpu" or "gpu:N".
  static Device parse(const std::string& text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_gpu() const { return type == DeviceType::GPU; }
  std::string str() const;
  bool operator==(const Device&) const = default;
};

// GPUs this build can use: 0 without a GPU backend or without a visible device. Never throws.
int gpu_device_count();
// Why gpu_device_count() is 0, with the checks to run ("" when there is a GPU).
std::string gpu_unavailable_reason();

}  // namespace hg
