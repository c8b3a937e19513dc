# The GPU communicator's library behind dist/gpu/comm_nccl.cpp: NCCL in CUDA builds, RCCL (AMD's
# NCCL, the same C API) in HIP builds.
#
# hourglass_find_gpu_communicator(<target> <backend>), <backend> cuda or hip: when the library
# is found, links <target> to it and defines HOURGLASS_HAS_NCCL=1 on it (both PRIVATE), and sets
# HOURGLASS_GPU_COMMUNICATOR to "NCCL" or "RCCL" in the caller's scope; otherwise sets it to ""
# and the build has no GPU communicator (asking for one is an InvalidInput, dist/comm.cpp).
#   cuda: nccl.h and libnccl, from the CUDA toolkit's folders or the system's (libnccl-dev).
#   hip:  ROCm's CMake package (find_package(rccl CONFIG): rccl-config.cmake or rcclConfig.cmake
#         under <prefix>/lib/cmake/rccl, found through CMAKE_PREFIX_PATH=/opt/rocm or rccl_DIR)
#         and its imported target roc::rccl; the header is <rccl/rccl.h>, which released RCCL
#         installs under the include folder hip::host already brings.
# tests/cmake/gpu_communicator_check.cmake configures a small project with this file against
# stub packages.
function(hourglass_find_gpu_communicator target backend)
  set(HOURGLASS_GPU_COMMUNICATOR "" PARENT_SCOPE)
  if(backend STREQUAL "cuda")
    find_path(HOURGLASS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(HOURGLASS_NCCL_LIBRARY nccl
                 HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
                       ${CUDAToolkit_LIBRARY_ROOT}/lib64)
    if(NOT HOURGLASS_NCCL_INCLUDE_DIR OR NOT HOURGLASS_NCCL_LIBRARY)
      message(STATUS "hourglass: no NCCL found (nccl.h, libnccl): built without the NCCL "
                     "communicator")
      return()
    endif()
    target_include_directories(${target} PRIVATE ${HOURGLASS_NCCL_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${HOURGLASS_NCCL_LIBRARY})
    set(found NCCL)
    set(where "${HOURGLASS_NCCL_LIBRARY}")
  elseif(backend STREQUAL "hip")
    find_package(rccl CONFIG QUIET)
    if(NOT rccl_FOUND OR NOT TARGET roc::rccl)
      message(STATUS "hourglass: no RCCL found (the rccl CMake package with target roc::rccl; "
                     "ROCm's rccl-dev, with CMAKE_PREFIX_PATH=/opt/rocm): built without the "
                     "RCCL communicator")
      return()
    endif()
    target_link_libraries(${target} PRIVATE roc::rccl)
    set(found RCCL)
    set(where "rccl ${rccl_VERSION} in ${rccl_DIR}")
  else()
    message(FATAL_ERROR "hourglass_find_gpu_communicator: backend '${backend}': use cuda or hip")
  endif()
  target_compile_definitions(${target} PRIVATE HOURGLASS_HAS_NCCL=1)
  message(STATUS "hourglass: ${found} communicator (${where})")
  set(HOURGLASS_GPU_COMMUNICATOR ${found} PARENT_SCOPE)
endfunction()
