# No hidden switches: nothing in the library decides what a run computes from the environment
# or from a process-wide switch (the [engine] table, train/config/engine_config.h, does).
#   cmake -DSOURCE_DIR=<repo> -P no_hidden_switches.cmake
# Fails, naming the file, when
#  - a file of src/ other than base/environment.cpp calls getenv (every read goes through
#    hg::env, base/environment.h, whose header lists what the environment may decide);
#  - a HOURGLASS_* variable that src/ reads is not one of those listed in environment.h;
#  - a file of src/ declares a setter of a process-wide engine switch (set_fused_*,
#    set_batched_*, set_conv_*, set_arena_*, set_side_stream_*).
file(GLOB_RECURSE files "${SOURCE_DIR}/src/*.cpp" "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.cu")
file(READ "${SOURCE_DIR}/src/hourglass/base/environment.h" allowed_text)
set(failures "")
foreach(f ${files})
  file(READ "${f}" text)
  file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
  if(NOT rel STREQUAL "src/hourglass/base/environment.cpp")
    string(REGEX MATCH "getenv[ ]*\\(" call "${text}")
    if(call)
      list(APPEND failures "${rel} calls getenv: read the variable through hg::env (base/environment.h)")
    endif()
  endif()
  string(REGEX MATCHALL "env::[a-z_]+\\(\"HOURGLASS_[A-Z0-9_]+\"" reads "${text}")
  foreach(r ${reads})
    string(REGEX MATCH "HOURGLASS_[A-Z0-9_]+" name "${r}")
    string(FIND "${allowed_text}" "${name}" at)
    if(at EQUAL -1)
      list(APPEND failures "${rel} reads ${name}, which base/environment.h does not list: make it a config key if it changes what a run computes")
    endif()
  endforeach()
  string(REGEX MATCH "void set_(fused|batched|conv|arena|side_stream)[a-z_]*\\(" setter "${text}")
  if(setter)
    list(APPEND failures "${rel} declares a process-wide switch (${setter}): make it a field of ops::EngineSettings")
  endif()
endforeach()
list(LENGTH files count)
if(failures)
  list(JOIN failures "\n  " message)
  message(FATAL_ERROR "hidden switches in the library:\n  ${message}")
endif()
message(STATUS "no hidden switches in ${count} files of src/")
