# Run by CTest (tests/layering/CMakeLists.txt):
#   MODE=allowed  every layer's probe of allowed includes compiles;
#   MODE=upward   every probe of an upward include fails, and fails because the header is not
#                 found (not for another reason).
include(${PROBES})
if(MODE STREQUAL "allowed")
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${LAYERING_ALLOWED}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "layering: an allowed include did not compile:\n${out}")
  endif()
  list(LENGTH LAYERING_ALLOWED n)
  message(STATUS "layering: the allowed includes of all ${n} layers compile")
elseif(MODE STREQUAL "upward")
  set(count 0)
  foreach(entry ${LAYERING_UPWARD})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 target)
    list(GET parts 1 header)
    execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${target}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(rc EQUAL 0)
      message(FATAL_ERROR "layering: ${target}: #include \"${header}\" compiled, but it runs "
                          "upward (is src/ on an include path?)")
    endif()
    string(REPLACE "." "\\." pattern "${header}")
    # GCC: "x.h: No such file or directory"; Clang: "'x.h' file not found".
    if(NOT out MATCHES "${pattern}(: No such file or directory|' file not found)")
      message(FATAL_ERROR "layering: ${target} failed, but not with '${header}' not found:\n${out}")
    endif()
    math(EXPR count "${count} + 1")
  endforeach()
  message(STATUS "layering: ${count} upward includes refused (header not found)")
else()
  message(FATAL_ERROR "layering: MODE=${MODE}: use allowed or upward")
endif()
