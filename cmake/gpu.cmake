# Resolves HOURGLASS_GPU (auto|cuda|hip|off) to HOURGLASS_GPU_BACKEND (cuda, hip or off) and
# finds what that backend needs. "auto" takes CUDA when nvcc and cuDNN are present, else HIP
# when hip, MIOpen and hipBLASLt are, else off.
set(HOURGLASS_GPU_BACKEND off)
string(TOLOWER "${HOURGLASS_GPU}" _hg_gpu)
if(NOT _hg_gpu MATCHES "^(auto|cuda|hip|off)$")
  message(FATAL_ERROR "HOURGLASS_GPU=${HOURGLASS_GPU}: use auto, cuda, hip or off")
endif()

function(_hg_find_cuda required)
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${HOURGLASS_CUDA_ARCHITECTURES} PARENT_SCOPE)
    set(CMAKE_CUDA_ARCHITECTURES ${HOURGLASS_CUDA_ARCHITECTURES})
  endif()
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    if(required)
      message(FATAL_ERROR "HOURGLASS_GPU=cuda: no CUDA compiler found (put nvcc on PATH or set "
                          "CMAKE_CUDA_COMPILER)")
    endif()
    return()
  endif()
  find_package(CUDAToolkit QUIET)
  find_library(HOURGLASS_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(HOURGLASS_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(NOT CUDAToolkit_FOUND OR NOT HOURGLASS_CUDNN_LIBRARY OR NOT HOURGLASS_CUDNN_INCLUDE_DIR
     OR NOT TARGET CUDA::cublasLt)
    if(required)
      message(FATAL_ERROR "HOURGLASS_GPU=cuda: needs the CUDA toolkit with cuBLASLt and cuDNN 9 "
                          "(cudnn.h, libcudnn.so); found toolkit=${CUDAToolkit_FOUND} "
                          "cudnn=${HOURGLASS_CUDNN_LIBRARY}")
    endif()
    message(STATUS "hourglass: nvcc found but not cuDNN/cuBLASLt; GPU backend off")
    return()
  endif()
  set(HOURGLASS_GPU_BACKEND cuda PARENT_SCOPE)
endfunction()

function(_hg_find_hip required)
  find_package(hip CONFIG QUIET)
  find_package(miopen CONFIG QUIET)
  find_package(hipblaslt CONFIG QUIET)
  if(NOT hip_FOUND OR NOT miopen_FOUND OR NOT hipblaslt_FOUND)
    if(required)
      message(FATAL_ERROR "HOURGLASS_GPU=hip: needs hip, MIOpen and hipBLASLt CMake packages "
                          "(ROCm >= 6; found hip=${hip_FOUND} miopen=${miopen_FOUND} "
                          "hipblaslt=${hipblaslt_FOUND}); configure with "
                          "-DCMAKE_CXX_COMPILER=<ROCm clang++> -DCMAKE_PREFIX_PATH=/opt/rocm")
    endif()
    return()
  endif()
  set(HOURGLASS_GPU_BACKEND hip PARENT_SCOPE)
endfunction()

if(_hg_gpu STREQUAL "cuda")
  _hg_find_cuda(TRUE)
elseif(_hg_gpu STREQUAL "hip")
  _hg_find_hip(TRUE)
elseif(_hg_gpu STREQUAL "auto")
  _hg_find_cuda(FALSE)
  if(HOURGLASS_GPU_BACKEND STREQUAL "off")
    _hg_find_hip(FALSE)
  endif()
endif()

if(HOURGLASS_GPU_BACKEND STREQUAL "cuda")
  enable_language(CUDA)
  # CMake 3.25 predates nvcc 13 and does not know its C++20 flag; CUDA sources follow the
  # project's C++20 standard, so tell CMake the flag.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
endif()
message(STATUS "hourglass: GPU backend: ${HOURGLASS_GPU_BACKEND} (HOURGLASS_GPU=${HOURGLASS_GPU})")
