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

# The HIP build compiles its kernels (.cu) with `-x hip --offload-arch=...` (src/CMakeLists.txt),
# which only Clang knows: ROCm's clang++ (/opt/rocm/llvm/bin/clang++). With g++ the configure
# would pass and the build fail, so this is checked first, before any package is looked for.
set(_HG_HIP_CMAKE_LINE
    "cmake -S . -B build -G Ninja -DHOURGLASS_GPU=hip -DCMAKE_CXX_COMPILER=/opt/rocm/llvm/bin/clang++ -DCMAKE_PREFIX_PATH=/opt/rocm")

# Oldest versions of ROCm 6.0's packages: the wrappers use ROCm 6 APIs (with ROCm 5.x headers
# blas_hipblaslt.cpp does not compile). MIOpen and hipBLASLt have their own numbering: ROCm 6.0
# ships hip 6.0, MIOpen 3.0 and hipBLASLt 0.6 (ROCm 6.2: 6.2, 3.2, 0.8).
set(_HG_HIP_MIN_VERSION 6.0)
set(_HG_MIOPEN_MIN_VERSION 3.0)
set(_HG_HIPBLASLT_MIN_VERSION 0.6)

# _hg_hip_too_old(<var>): sets <var> to "" when the found hip, MIOpen and hipBLASLt are recent
# enough, else to a text naming each package found older than its minimum. A package found
# without a version (no *-config-version.cmake) is not judged.
function(_hg_hip_too_old var)
  set(old "")
  foreach(pkg hip miopen hipblaslt)
    string(TOUPPER "${pkg}" upper)
    set(minimum ${_HG_${upper}_MIN_VERSION})
    if(${pkg}_FOUND AND NOT "${${pkg}_VERSION}" STREQUAL ""
       AND "${${pkg}_VERSION}" VERSION_LESS minimum)
      list(APPEND old "${pkg} ${${pkg}_VERSION} (needs >= ${minimum}, in ${${pkg}_DIR})")
    endif()
  endforeach()
  list(JOIN old ", " text)
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

function(_hg_find_hip required)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    if(required)
      message(FATAL_ERROR "HOURGLASS_GPU=hip: the C++ compiler is ${CMAKE_CXX_COMPILER_ID} "
                          "(${CMAKE_CXX_COMPILER}); the HIP build needs ROCm's clang++, which "
                          "compiles the kernels (-x hip --offload-arch). Configure a new build "
                          "folder with: ${_HG_HIP_CMAKE_LINE}")
    endif()
    message(STATUS "hourglass: HIP needs ROCm's clang++ as the C++ compiler, not "
                   "${CMAKE_CXX_COMPILER_ID}; HIP not looked for")
    return()
  endif()
  # hip's config reads GPU_TARGETS (for hip::device, which the build does not link; set for the
  # libraries that might read it too).
  if(NOT DEFINED GPU_TARGETS)
    set(GPU_TARGETS "${HOURGLASS_HIP_ARCHITECTURES}")
  endif()
  find_package(hip CONFIG QUIET)
  find_package(miopen CONFIG QUIET)
  find_package(hipblaslt CONFIG QUIET)
  _hg_hip_too_old(too_old)
  if(too_old)
    if(required)
      message(FATAL_ERROR "HOURGLASS_GPU=hip: ROCm >= 6.0 is needed (hip >= "
                          "${_HG_HIP_MIN_VERSION}, MIOpen >= ${_HG_MIOPEN_MIN_VERSION}, "
                          "hipBLASLt >= ${_HG_HIPBLASLT_MIN_VERSION}); found ${too_old}. Install "
                          "ROCm 6 and point CMAKE_PREFIX_PATH at it: ${_HG_HIP_CMAKE_LINE}")
    endif()
    message(STATUS "hourglass: ROCm older than 6.0 (${too_old}); GPU backend off")
    return()
  endif()
  if(NOT hip_FOUND OR NOT miopen_FOUND OR NOT hipblaslt_FOUND)
    if(required)
      message(FATAL_ERROR "HOURGLASS_GPU=hip: needs hip, MIOpen and hipBLASLt CMake packages "
                          "(ROCm >= 6; found hip=${hip_FOUND} miopen=${miopen_FOUND} "
                          "hipblaslt=${hipblaslt_FOUND}); configure with: ${_HG_HIP_CMAKE_LINE}")
    endif()
    return()
  endif()
  set(HOURGLASS_GPU_BACKEND hip PARENT_SCOPE)
endfunction()

# _hg_hip_targets(<var>): sets <var> to the targets of HOURGLASS_HIP_ARCHITECTURES that the C++
# compiler knows, each checked by compiling an empty file for it (-x hip --offload-arch=<target>,
# without ROCm's headers and device libraries: only the target's name is in question). A target
# of the default list that the compiler does not know (gfx950 needs LLVM 20, ROCm 7's clang) is
# left out with a warning; one the user listed stops the configuration.
function(_hg_hip_targets var)
  include(CheckCXXSourceCompiles)
  set(known "")
  foreach(arch ${HOURGLASS_HIP_ARCHITECTURES})
    if(NOT arch MATCHES "^gfx[0-9a-f]+(:[a-z0-9_]+[+-])*$")
      message(FATAL_ERROR "HOURGLASS_HIP_ARCHITECTURES: '${arch}' is not an AMD GPU target "
                          "(gfx90a, gfx942, gfx1100, ... as `rocminfo` prints them)")
    endif()
    string(MAKE_C_IDENTIFIER "HOURGLASS_COMPILER_KNOWS_${arch}" result)
    set(CMAKE_REQUIRED_FLAGS "-x hip --offload-arch=${arch} -nogpulib -nogpuinc")
    set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
    set(CMAKE_REQUIRED_QUIET ON)
    check_cxx_source_compiles("int hourglass_probe;" ${result})
    if(${result})
      list(APPEND known ${arch})
    elseif(arch IN_LIST _HG_HIP_DEFAULT_ARCHITECTURES)
      message(WARNING "hourglass: ${CMAKE_CXX_COMPILER} (${CMAKE_CXX_COMPILER_ID} "
                      "${CMAKE_CXX_COMPILER_VERSION}) does not know the AMD GPU target ${arch}: "
                      "built without it (a newer ROCm's clang++ has it)")
    else()
      message(FATAL_ERROR "HOURGLASS_HIP_ARCHITECTURES: ${CMAKE_CXX_COMPILER} "
                          "(${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}) does not "
                          "know the AMD GPU target ${arch}; use a newer ROCm's clang++ or leave "
                          "${arch} out")
    endif()
  endforeach()
  if(NOT known)
    message(FATAL_ERROR "HOURGLASS_HIP_ARCHITECTURES: the compiler knows none of "
                        "${HOURGLASS_HIP_ARCHITECTURES}")
  endif()
  set(${var} ${known} PARENT_SCOPE)
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
if(HOURGLASS_GPU_BACKEND STREQUAL "hip")
  # The targets the kernels are compiled for (src/CMakeLists.txt).
  _hg_hip_targets(HOURGLASS_HIP_TARGETS)
  message(STATUS "hourglass: AMD GPU targets: ${HOURGLASS_HIP_TARGETS}")
endif()
message(STATUS "hourglass: GPU backend: ${HOURGLASS_GPU_BACKEND} (HOURGLASS_GPU=${HOURGLASS_GPU})")
