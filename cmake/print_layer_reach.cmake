# cmake -P cmake/print_layer_reach.cmake: one line per layer on stdout, the layer followed by
# every layer in its reach (itself included; cmake/layers.cmake). scripts/hip-check.sh builds its
# include roots from these lines, as the CMake build does from the same graph.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)
foreach(layer ${HOURGLASS_LAYERS})
  hourglass_layer_reach(${layer} reach)
  string(REPLACE ";" " " reach "${reach}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E echo "${layer} ${reach}")
endforeach()
