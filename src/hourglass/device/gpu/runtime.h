// The portable GPU runtime: one set of names (gpuMalloc, gpuStream_t, ...) that maps to the CUDA
// runtime under nvcc and to HIP under hipcc/clang, so every .cu file and every host file of the
// GPU backend is written once. Also the checked-call macro that turns a failed runtime call
// into an hg::Error naming the call, the error and what to do about it.
//
// Compiled only in GPU builds (HOURGLASS_HAS_GPU). Select HIP with -DHOURGLASS_GPU_HIP (set by
// CMake for -DHOURGLASS_GPU=hip) or by compiling under hipcc (__HIP__).
#pragma once

#if defined(HOURGLASS_GPU_HIP) || defined(__HIP__) || defined(__HIPCC__)
#ifndef HOURGLASS_GPU_HIP
#define HOURGLASS_GPU_HIP 1
#endif
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuErrorOutOfMemory hipErrorOutOfMemory
#define gpuErrorInvalidValue hipErrorInvalidValue
#define gpuErrorNoDevice hipErrorNoDevice
#define gpuErrorInsufficientDriver hipErrorInsufficientDriver
#define gpuErrorNotReady hipErrorNotReady
#define gpuGetErrorName hipGetErrorName
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuPeekAtLastError hipPeekAtLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuGetDevice hipGetDevice
#define gpuDeviceProp hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuDriverGetVersion hipDriverGetVersion
#define gpuRuntimeGetVersion hipRuntimeGetVersion
#define gpuMemGetInfo hipMemGetInfo
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMallocHost(ptr, bytes) hipHostMalloc(ptr, bytes, hipHostMallocDefault)
#define gpuFreeHost hipHostFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpy2DAsync hipMemcpy2DAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuMemcpyDefault hipMemcpyDefault
#define gpuStream_t hipStream_t
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamWaitEvent hipStreamWaitEvent
#define gpuEvent_t hipEvent_t
#define gpuEventCreate hipEventCreate
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventQuery hipEventQuery
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuDeviceAttr_t hipDeviceAttribute_t
#define gpuDevAttrClockRate hipDeviceAttributeClockRate
#define gpuDevAttrMemoryClockRate hipDeviceAttributeMemoryClockRate
#define gpuDevAttrMemoryBusWidth hipDeviceAttributeMemoryBusWidth
#define gpuDevAttrL2CacheSize hipDeviceAttributeL2CacheSize
#define gpuDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define gpuDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define gpuDevAttrComputeCapabilityMinor hipDeviceAttributeComputeCapabilityMinor
#define gpuDevAttrWarpSize hipDeviceAttributeWarpSize
#define gpuDeviceGetPCIBusId hipDeviceGetPCIBusId
#define gpuPointerAttributes hipPointerAttribute_t
#define gpuPointerGetAttributes hipPointerGetAttributes
#define gpuMemoryTypeHost hipMemoryTypeHost
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define gpuStreamCaptureMode hipStreamCaptureMode
#define gpuThreadExchangeStreamCaptureMode hipThreadExchangeStreamCaptureMode
#define gpuStreamCaptureStatus hipStreamCaptureStatus
#define gpuStreamCaptureStatusNone hipStreamCaptureStatusNone
#define gpuStreamCaptureStatusActive hipStreamCaptureStatusActive
#define gpuStreamIsCapturing hipStreamIsCapturing
#define gpuGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphGetNodes hipGraphGetNodes
#define gpuGraphGetRootNodes hipGraphGetRootNodes
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuGraphNode_t hipGraphNode_t
#define gpuGraphNodeType hipGraphNodeType
#define gpuGraphNodeTypeMemset hipGraphNodeTypeMemset
#define gpuGraphNodeGetType hipGraphNodeGetType
#define gpuMemsetParams hipMemsetParams
#define gpuGraphMemsetNodeGetParams hipGraphMemsetNodeGetParams
#define gpuKernelNodeParams hipKernelNodeParams
#define gpuGraphAddKernelNode hipGraphAddKernelNode
#define gpuGraphDestroyNode hipGraphDestroyNode
#define gpuGraphNodeGetDependencies hipGraphNodeGetDependencies
#define gpuGraphNodeGetDependentNodes hipGraphNodeGetDependentNodes
#define gpuGraphAddDependencies hipGraphAddDependencies
// ROCm 6 renamed hipPointerAttribute_t::memoryType to type.
#if HIP_VERSION_MAJOR >= 6
#define HG_GPU_POINTER_TYPE(attr) ((attr).type)
#else
#define HG_GPU_POINTER_TYPE(attr) ((attr).memoryType)
#endif
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuErrorOutOfMemory cudaErrorMemoryAllocation
#define gpuErrorInvalidValue cudaErrorInvalidValue
#define gpuErrorNoDevice cudaErrorNoDevice
#define gpuErrorInsufficientDriver cudaErrorInsufficientDriver
#define gpuErrorNotReady cudaErrorNotReady
#define gpuGetErrorName cudaGetErrorName
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuPeekAtLastError cudaPeekAtLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuGetDevice cudaGetDevice
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuDriverGetVersion cudaDriverGetVersion
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define gpuMemGetInfo cudaMemGetInfo
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMallocHost(ptr, bytes) cudaMallocHost(ptr, bytes)
#define gpuFreeHost cudaFreeHost
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpy2DAsync cudaMemcpy2DAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuMemcpyDefault cudaMemcpyDefault
#define gpuStream_t cudaStream_t
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventQuery cudaEventQuery
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuDeviceAttr_t cudaDeviceAttr
#define gpuDevAttrClockRate cudaDevAttrClockRate
#define gpuDevAttrMemoryClockRate cudaDevAttrMemoryClockRate
#define gpuDevAttrMemoryBusWidth cudaDevAttrGlobalMemoryBusWidth
#define gpuDevAttrL2CacheSize cudaDevAttrL2CacheSize
#define gpuDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
#define gpuDevAttrComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define gpuDevAttrComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#define gpuDevAttrWarpSize cudaDevAttrWarpSize
#define gpuDeviceGetPCIBusId cudaDeviceGetPCIBusId
#define gpuPointerAttributes cudaPointerAttributes
#define gpuPointerGetAttributes cudaPointerGetAttributes
#define gpuMemoryTypeHost cudaMemoryTypeHost
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define gpuStreamCaptureMode cudaStreamCaptureMode
#define gpuThreadExchangeStreamCaptureMode cudaThreadExchangeStreamCaptureMode
#define gpuStreamCaptureStatus cudaStreamCaptureStatus
#define gpuStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define gpuStreamCaptureStatusActive cudaStreamCaptureStatusActive
#define gpuStreamIsCapturing cudaStreamIsCapturing
#define gpuGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphGetNodes cudaGraphGetNodes
#define gpuGraphGetRootNodes cudaGraphGetRootNodes
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphNode_t cudaGraphNode_t
#define gpuGraphNodeType cudaGraphNodeType
#define gpuGraphNodeTypeMemset cudaGraphNodeTypeMemset
#define gpuGraphNodeGetType cudaGraphNodeGetType
#define gpuMemsetParams cudaMemsetParams
#define gpuGraphMemsetNodeGetParams cudaGraphMemsetNodeGetParams
#define gpuKernelNodeParams cudaKernelNodeParams
#define gpuGraphAddKernelNode cudaGraphAddKernelNode
#define gpuGraphDestroyNode cudaGraphDestroyNode
#define gpuGraphNodeGetDependencies cudaGraphNodeGetDependencies
#define gpuGraphNodeGetDependentNodes cudaGraphNodeGetDependentNodes
#define gpuGraphAddDependencies cudaGraphAddDependencies
#define HG_GPU_POINTER_TYPE(attr) ((attr).type)
#endif

#include <cstddef>
#include <string>

#include "hourglass/base/dtype.h"

namespace hg::gpu {

// "cuda" or "hip": which runtime this build targets.
#ifdef HOURGLASS_GPU_HIP
inline constexpr const char* kRuntimeName = "hip";
#else
inline constexpr const char* kRuntimeName = "cuda";
#endif

// Throws the hg::Error for a failed runtime call `what` (the call's text) returning `err`:
// OutOfMemory for allocation failures, Runtime otherwise, each with a remedy that fits the
// error (no device: the checks to run; driver too old: both versions; ...).
[[noreturn]] void throw_gpu_error(gpuError_t err, const char* what, const char* file, int line);

// An internal error: a kernel launcher of `op` got a dtype its host side should have refused.
[[noreturn]] void unsupported_dtype(const char* op, DType dtype);

// The remedy of every out-of-memory error on a GPU (the runtime's, the allocator's, the
// libraries'): the settings that use less memory and the tool that shows other processes'.
std::string out_of_memory_remedy();

// A runtime or driver version number as text: CUDA's 13000 is "13.0", HIP's 60241134 "6.2.41134".
std::string runtime_version_text(int version);

// The number of GPUs the runtime sees; 0 (never an error) when there is no driver or device.
int device_count();
// Why device_count() is 0 ("" when it is not): the runtime's error and what to check.
std::string no_device_reason();

// Makes `index` the calling thread's current device (cached: cheap when it already is).
void set_device(int index);

// The stream every op on device `index` is issued to. Work on one device is ordered on this
// one stream; the caching allocator relies on that order to reuse freed blocks at once.
gpuStream_t stream(int index);

// The warp width of the calling thread's current device, as the device reports it (cached):
// 32 on NVIDIA; on AMD 64 (CDNA, GCN) or 32 (RDNA). For the host's launch arithmetic, where the
// compile targets no GPU; kernels use kWarp (backend/gpu/kernel_util.cuh).
int current_warp_width();

// Waits until all work issued to device `index`'s stream has finished.
void synchronize(int index);

}  // namespace hg::gpu

// Checks a runtime call: HG_GPU_CHECK(gpuMalloc(&p, n));
#define HG_GPU_CHECK(call)                                                \
  do {                                                                    \
    const gpuError_t hg_gpu_err_ = (call);                                \
    if (hg_gpu_err_ != gpuSuccess) [[unlikely]]                           \
      ::hg::gpu::throw_gpu_error(hg_gpu_err_, #call, __FILE__, __LINE__); \
  } while (0)

// Checks that the last kernel launch succeeded (bad configuration, missing code for the GPU's
// architecture). Does not wait for the kernel.
#define HG_GPU_CHECK_LAUNCH() HG_GPU_CHECK(gpuGetLastError())
