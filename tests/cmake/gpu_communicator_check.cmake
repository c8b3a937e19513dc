# Checks cmake/gpu_communicator.cmake (which GPU communicator library a build links, and when
# it defines HOURGLASS_HAS_NCCL) by configuring tests/cmake/gpu_communicator_project against
# stub packages in a scratch folder; nothing is compiled. Run by CTest (tests/CMakeLists.txt):
#   cmake -DSOURCE_DIR=<project> -DWORK_DIR=<scratch> -P <this>
# Cases, each a configure with the machine's own folders left out of the search:
#   hip_rccl      a prefix laid out as ROCm installs RCCL (lib/cmake/rccl/rcclConfig.cmake with
#                 the imported target roc::rccl): linked, HOURGLASS_HAS_NCCL=1, "RCCL".
#   hip_none      no rccl package: no definition, no library, and the status line says so.
#   hip_no_target an rccl package without roc::rccl: the same as none.
#   cuda_nccl     a prefix with include/nccl.h and lib/libnccl.so: linked, HOURGLASS_HAS_NCCL=1,
#                 "NCCL" (the CUDA build's search, unchanged).
foreach(var SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "gpu_communicator_check: -D${var}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")

set(rccl_prefix "${WORK_DIR}/rocm")
file(WRITE "${rccl_prefix}/lib/cmake/rccl/rcclConfig.cmake" "
# stub rccl package, as ROCm lays it out
if(NOT TARGET roc::rccl)
  add_library(roc::rccl SHARED IMPORTED)
  set_target_properties(roc::rccl PROPERTIES
    IMPORTED_LOCATION \"${rccl_prefix}/lib/librccl.so.1\"
    INTERFACE_INCLUDE_DIRECTORIES \"${rccl_prefix}/include\")
endif()
")
file(WRITE "${rccl_prefix}/lib/cmake/rccl/rcclConfigVersion.cmake"
     "set(PACKAGE_VERSION 2.26.6)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n")
file(WRITE "${rccl_prefix}/include/rccl/rccl.h" "")
set(bare_prefix "${WORK_DIR}/rocm-no-target")
file(WRITE "${bare_prefix}/lib/cmake/rccl/rcclConfig.cmake" "# stub rccl package, no targets\n")
set(nccl_prefix "${WORK_DIR}/cuda")
file(WRITE "${nccl_prefix}/include/nccl.h" "")
file(WRITE "${nccl_prefix}/lib/libnccl.so" "")
set(empty_prefix "${WORK_DIR}/empty")
file(MAKE_DIRECTORY "${empty_prefix}")

# configure(<case> <backend> <prefix>): configures the probe; sets result (result.txt's text,
# one line per entry) and output (cmake's) in the caller's scope.
function(configure case backend prefix)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/cmake/gpu_communicator_project"
            -B "${WORK_DIR}/${case}" -DHG_MODULE=${SOURCE_DIR}/cmake/gpu_communicator.cmake
            -DHG_BACKEND=${backend} -DHG_PREFIX=${prefix}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${WORK_DIR}/${case}/result.txt")
    message(FATAL_ERROR "gpu_communicator_check ${case}: the probe did not configure "
                        "(exit code ${rc}):\n${out}\n${err}")
  endif()
  file(READ "${WORK_DIR}/${case}/result.txt" text)
  set(result "${text}" PARENT_SCOPE)
  set(output "${out}\n${err}" PARENT_SCOPE)
endfunction()

# expect(<case> <haystack> <needle> [NOT]): fails when <needle> is missing from <haystack> (or,
# with NOT, present).
function(expect case haystack needle)
  string(FIND "${haystack}" "${needle}" at)
  if(ARGN STREQUAL "NOT" AND NOT at LESS 0)
    message(FATAL_ERROR "gpu_communicator_check ${case}: \"${needle}\" must not be in:\n${haystack}")
  elseif(NOT ARGN STREQUAL "NOT" AND at LESS 0)
    message(FATAL_ERROR "gpu_communicator_check ${case}: expected \"${needle}\" in:\n${haystack}")
  endif()
endfunction()

configure(hip_rccl hip "${rccl_prefix}")
expect(hip_rccl "${result}" "defs=HOURGLASS_HAS_NCCL=1\n")
expect(hip_rccl "${result}" "libs=roc::rccl\n")
expect(hip_rccl "${result}" "communicator=RCCL\n")
expect(hip_rccl "${output}" "hourglass: RCCL communicator (rccl 2.26.6 in ${rccl_prefix}/lib/cmake/rccl)")

foreach(case hip_none hip_no_target)
  if(case STREQUAL "hip_none")
    set(prefix "${empty_prefix}")
  else()
    set(prefix "${bare_prefix}")
  endif()
  configure(${case} hip "${prefix}")
  expect(${case} "${result}" "HOURGLASS_HAS_NCCL" NOT)
  expect(${case} "${result}" "libs=libs-NOTFOUND\n")
  expect(${case} "${result}" "communicator=\n")
  expect(${case} "${output}" "hourglass: no RCCL found")
endforeach()

configure(cuda_nccl cuda "${nccl_prefix}")
expect(cuda_nccl "${result}" "defs=HOURGLASS_HAS_NCCL=1\n")
expect(cuda_nccl "${result}" "libs=${nccl_prefix}/lib/libnccl.so\n")
expect(cuda_nccl "${result}" "includes=${nccl_prefix}/include\n")
expect(cuda_nccl "${result}" "communicator=NCCL\n")
message(STATUS "gpu_communicator_check: 4 cases passed")
