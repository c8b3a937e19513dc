// Runtime errors with remedies, device discovery, and the per-device stream.
#include "hourglass/device/gpu/runtime.h"

#include <array>
#include <atomic>
#include <mutex>

#include "hourglass/base/error.h"
#include "hourglass/device/device.h"

namespace hg::gpu {

std::string runtime_version_text(int v) {
  // CUDA: 1000*major + 10*minor; HIP: 10000000*major + 100000*minor + patch.
#ifdef HOURGLASS_GPU_HIP
  return fmt::format("{}.{}.{}", v / 10000000, (v / 100000) % 100, v % 100000);
#else
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
#endif
}

namespace {

std::string versions() {
  int driver = 0, runtime = 0;
  (void)gpuDriverGetVersion(&driver);
  (void)gpuRuntimeGetVersion(&runtime);
  const std::string driver_text =
      driver ? fmt::format("driver supports {} {}", kRuntimeName, runtime_version_text(driver))
             : std::string("no GPU driver found");
  return fmt::format("{}, hourglass was built with {} runtime {}", driver_text, kRuntimeName,
                     runtime_version_text(runtime));
}

#ifdef HOURGLASS_GPU_HIP
constexpr const char* kNoDeviceChecks =
    "check that `rocm-smi` lists the GPU, that the amdgpu driver is loaded (/dev/kfd exists), "
    "that this user is in the video and render groups, and in a container pass --device=/dev/kfd "
    "--device=/dev/dri --group-add video; HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES may hide it";
#else
constexpr const char* kNoDeviceChecks =
    "check that `nvidia-smi` lists the GPU and the driver is loaded, in a container pass "
    "--gpus all (NVIDIA container toolkit); CUDA_VISIBLE_DEVICES may hide it; or use "
    "device = \"cpu\"";
#endif

std::string remedy_for(gpuError_t err) {
  switch (err) {
    case gpuErrorOutOfMemory: return out_of_memory_remedy();
    case gpuErrorNoDevice: return kNoDeviceChecks;
    case gpuErrorInsufficientDriver:
      return fmt::format(
          "the GPU driver is missing or older than the runtime ({}); install a "
          "newer driver or rebuild against an older toolkit",
          versions());
#ifdef HOURGLASS_GPU_HIP
    // A kernel without code for this gfx target fails as one of these (HIP has no
    // "illegal instruction" code of CUDA's kind; HSA's out-of-resources arrives as out of memory).
    case hipErrorNoBinaryForGpu:
    case hipErrorInvalidImage:
    case hipErrorInvalidDeviceFunction:
      return "this build has no code for this GPU's architecture (gfx target); rebuild with "
             "-DHOURGLASS_HIP_ARCHITECTURES=<the gfx name `rocminfo` prints>";
#else
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this build has no code for this GPU's architecture; rebuild with "
             "-DHOURGLASS_CUDA_ARCHITECTURES=<its compute capability, e.g. 90>";
#endif
    default:
      return "an earlier kernel may have failed: rerun with CUDA_LAUNCH_BLOCKING=1 (HIP: "
             "AMD_SERIALIZE_KERNEL=3) to find it; `hourglass doctor` checks the GPU stack";
  }
}

struct DeviceState {
  std::once_flag once;
  gpuStream_t stream = nullptr;
  std::atomic<int> warp_width{0};  // 0 until first asked
};
std::array<DeviceState, kMaxDevices> g_devices;
thread_local int t_current = -1;

}  // namespace

std::string out_of_memory_remedy() {
#ifdef HOURGLASS_GPU_HIP
  constexpr const char* smi = "rocm-smi";
#else
  constexpr const char* smi = "nvidia-smi";
#endif
  return fmt::format(
      "set train.micro_batch = \"auto\" (a step that runs out of memory is "
      "retried in smaller micro-batches) or a smaller train.batch_size, use "
      "precision = \"bf16\", or free the memory other processes hold ({} lists "
      "them)",
      smi);
}

void throw_gpu_error(gpuError_t err, const char* what, const char* file, int line) {
  (void)gpuGetLastError();  // clear a sticky-free error so later calls are not blamed
  const std::string message = fmt::format("{} failed: {} ({}) at {}:{}", what, gpuGetErrorName(err),
                                          gpuGetErrorString(err), file, line);
  throw Error(err == gpuErrorOutOfMemory ? ErrorKind::OutOfMemory : ErrorKind::Runtime, message,
              remedy_for(err));
}

void unsupported_dtype(const char* op, DType dtype) {
  throw Error(ErrorKind::Internal,
              fmt::format("gpu {}: the kernel got dtype {}, which its host side should have "
                          "refused",
                          op, dtype_name(dtype)));
}

int device_count() {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return n;
}

std::string no_device_reason() {
  int n = 0;
  const gpuError_t err = gpuGetDeviceCount(&n);
  (void)gpuGetLastError();
  if (err == gpuSuccess && n > 0) return "";
  const std::string cause =
      err == gpuSuccess ? std::string("the runtime reports 0 devices")
                        : fmt::format("{}: {}", gpuGetErrorName(err), gpuGetErrorString(err));
  return fmt::format("no {} GPU is visible ({}; {}); {}", kRuntimeName, cause, versions(),
                     kNoDeviceChecks);
}

void set_device(int index) {
  if (t_current == index) return;
  const int n = device_count();
  if (index < 0 || index >= n || index >= kMaxDevices) {
    if (n == 0)
      throw_invalid(fmt::format("device gpu:{} requested, but {}", index, no_device_reason()),
                    "or use device = \"cpu\"");
    throw_invalid(fmt::format("device gpu:{} requested, but this machine has {} GPU{} "
                              "(gpu:0..gpu:{})",
                              index, n, n == 1 ? "" : "s", n - 1),
                  "pick an existing device in the config's device key or --set device=gpu:N");
  }
  HG_GPU_CHECK(gpuSetDevice(index));
  t_current = index;
}

gpuStream_t stream(int index) {
  HG_ASSERT(index >= 0 && index < kMaxDevices, "gpu index {} out of range", index);
  DeviceState& d = g_devices[size_t(index)];
  std::call_once(d.once, [&] {
    set_device(index);
    HG_GPU_CHECK(gpuStreamCreateWithFlags(&d.stream, gpuStreamNonBlocking));
  });
  return d.stream;
}

int current_warp_width() {
  int index = 0;
  HG_GPU_CHECK(gpuGetDevice(&index));
  HG_ASSERT(index >= 0 && index < kMaxDevices, "gpu index {} out of range", index);
  std::atomic<int>& cached = g_devices[size_t(index)].warp_width;
  int width = cached.load(std::memory_order_relaxed);
  if (width == 0) {
    HG_GPU_CHECK(gpuDeviceGetAttribute(&width, gpuDevAttrWarpSize, index));
    cached.store(width, std::memory_order_relaxed);
  }
  return width;
}

void synchronize(int index) {
  set_device(index);
  HG_GPU_CHECK(gpuStreamSynchronize(stream(index)));
}

}  // namespace hg::gpu
