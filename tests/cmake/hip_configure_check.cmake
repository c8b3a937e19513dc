# Configures a scratch build of the project with -DHOURGLASS_GPU=hip (configure only: no tests,
# no benchmarks) and checks what cmake/gpu.cmake says. Run by CTest (tests/CMakeLists.txt):
#   cmake -DSOURCE_DIR=<project> -DWORK_DIR=<scratch> -DCXX=<compiler> -DCASE=<case> -P <this>
# CASE:
#   gcc    CXX is g++: configure must fail, naming ROCm's clang++ and the cmake line. The
#          compiler is checked before any package is looked for, so this holds with or without
#          ROCm installed.
#   rocm5  CXX is clang++, hip/MIOpen/hipBLASLt are fake config packages of ROCm 5.7's versions
#          (5.7.1, 2.20.0, 0.4.0): configure must fail, naming the versions found.
#   rocm6  the same with ROCm 6.2's versions (6.2.41134, 3.2.0, 0.8.0): the version check must
#          pass (the backend becomes hip). The configure fails later, since the fake packages
#          define no targets; only the absence of the version message is checked.
foreach(var SOURCE_DIR WORK_DIR CXX CASE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "hip_configure_check: -D${var}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# fake_package(<name> <version>): a config package that only has a version.
function(fake_package name version)
  set(dir "${WORK_DIR}/packages/${name}")
  file(WRITE "${dir}/${name}-config.cmake" "# fake ${name} ${version}, no targets\n")
  file(WRITE "${dir}/${name}-config-version.cmake"
       "set(PACKAGE_VERSION ${version})\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n")
  set(${name}_dir_arg "-D${name}_DIR=${dir}" PARENT_SCOPE)
endfunction()

set(extra "")
if(CASE STREQUAL "rocm5")
  fake_package(hip 5.7.1)
  fake_package(miopen 2.20.0)
  fake_package(hipblaslt 0.4.0)
  set(extra ${hip_dir_arg} ${miopen_dir_arg} ${hipblaslt_dir_arg})
elseif(CASE STREQUAL "rocm6")
  fake_package(hip 6.2.41134)
  fake_package(miopen 3.2.0)
  fake_package(hipblaslt 0.8.0)
  set(extra ${hip_dir_arg} ${miopen_dir_arg} ${hipblaslt_dir_arg})
elseif(NOT CASE STREQUAL "gcc")
  message(FATAL_ERROR "hip_configure_check: CASE=${CASE}: use gcc, rocm5 or rocm6")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -DHOURGLASS_GPU=hip
          -DCMAKE_CXX_COMPILER=${CXX} -DHOURGLASS_BUILD_TESTS=OFF -DHOURGLASS_BUILD_BENCH=OFF
          ${extra}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}\n${err}")
# The message as the user sees it, one line (CMake wraps FATAL_ERROR text).
string(REGEX REPLACE "[ \t\r\n]+" " " flat "${all}")

# expect(<text>): fails unless the configure output contains <text>.
function(expect text)
  string(FIND "${flat}" "${text}" at)
  if(at LESS 0)
    message(FATAL_ERROR "hip_configure_check ${CASE}: expected \"${text}\" in the configure "
                        "output (exit code ${rc}):\n${all}")
  endif()
endfunction()

if(CASE STREQUAL "gcc")
  if(rc EQUAL 0)
    message(FATAL_ERROR "hip_configure_check gcc: -DHOURGLASS_GPU=hip with ${CXX} configured; "
                        "it must fail at configure time:\n${all}")
  endif()
  expect("HOURGLASS_GPU=hip: the C++ compiler is GNU")
  expect("-DCMAKE_CXX_COMPILER=/opt/rocm/llvm/bin/clang++")
elseif(CASE STREQUAL "rocm5")
  if(rc EQUAL 0)
    message(FATAL_ERROR "hip_configure_check rocm5: ROCm 5.7 packages configured:\n${all}")
  endif()
  expect("HOURGLASS_GPU=hip: ROCm >= 6.0 is needed")
  expect("found hip 5.7.1 (needs >= 6.0")
  expect("miopen 2.20.0 (needs >= 3.0")
  expect("hipblaslt 0.4.0 (needs >= 0.6")
else()
  string(FIND "${flat}" "ROCm >= 6.0 is needed" at)
  if(NOT at LESS 0)
    message(FATAL_ERROR "hip_configure_check rocm6: ROCm 6.2's versions refused:\n${all}")
  endif()
  expect("hourglass: GPU backend: hip (HOURGLASS_GPU=hip)")
endif()
message(STATUS "hip_configure_check ${CASE}: as expected")
