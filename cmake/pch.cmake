# Precompiled headers (HOURGLASS_PCH, on by default): the standard and third-party headers that
# most files include, parsed once per kind of target instead of once per file. Measured with g++
# 12 on one core: CLI11 alone costs 11 s a file, nlohmann/json 3.9 s, toml++ 3.1 s, GoogleTest
# 2.8 s, spdlog 1.7 s, fmt 1.0 s. Only headers from outside the project go in: hourglass's own
# headers stay out, so a layer still cannot see a higher layer's headers (cmake/layers.cmake)
# and a change to one of them rebuilds only its includers. CUDA files (nvcc) take no PCH.
option(HOURGLASS_PCH "Precompile the common standard and third-party headers" ON)

set(HG_PCH_STD <algorithm> <array> <atomic> <chrono> <cmath> <cstdint> <cstring> <filesystem>
    <functional> <map> <memory> <mutex> <optional> <string> <string_view> <utility> <vector>)
# The library's layers: log.h (spdlog) and error.h (fmt) are included almost everywhere.
set(HG_PCH_LIBRARY ${HG_PCH_STD} <fmt/format.h> <spdlog/spdlog.h>)
# The command-line tool: CLI11 in every command's file, JSON in most.
set(HG_PCH_TOOL ${HG_PCH_LIBRARY} <CLI/CLI.hpp> <nlohmann/json.hpp>)
# The tests: GoogleTest in every file, JSON and files in many.
set(HG_PCH_TESTS ${HG_PCH_LIBRARY} <fstream> <nlohmann/json.hpp> <gtest/gtest.h>)

# hourglass_precompile(<target> <list> [REUSE_FROM <target>]): the C++ files of <target> include
# the headers of <list> (a variable name) precompiled, or reuse those of another target built
# with the same flags and no macro definition that <target> lacks (src/CMakeLists.txt's
# hourglass_pch for the layers).
function(hourglass_precompile target list)
  if(NOT HOURGLASS_PCH)
    return()
  endif()
  cmake_parse_arguments(arg "" "REUSE_FROM" "" ${ARGN})
  if(arg_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${arg_REUSE_FROM})
    return()
  endif()
  set(headers "")
  foreach(header ${${list}})
    list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
  endforeach()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
