# Installing hourglass: `cmake --install build [--prefix DIR] [--component cli|dev]`, or Debian
# packages from `cpack -G DEB` in the build folder (cpack --config build/CPackConfig.cmake).
#   cli  the hourglass command, its bash and zsh completions, the example configs, README, docs,
#        LICENSE
#        (Debian package hourglass)
#   dev  the static libraries of the layers, their headers and a CMake package: a C++ program
#        uses `find_package(hourglass)` and links `hourglass::hourglass` (all layers), or one
#        layer such as `hourglass::ops` (Debian package hourglass-dev)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS hourglass RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/hourglass/configs COMPONENT cli)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)

# The bash and zsh completions, written by the built command from its own option definitions.
set(HOURGLASS_COMPLETION ${PROJECT_BINARY_DIR}/completions/hourglass)
set(HOURGLASS_ZSH_COMPLETION ${PROJECT_BINARY_DIR}/completions/_hourglass)
add_custom_command(OUTPUT ${HOURGLASS_COMPLETION} ${HOURGLASS_ZSH_COMPLETION}
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/completions
                   COMMAND $<TARGET_FILE:hourglass> completion bash > ${HOURGLASS_COMPLETION}
                   COMMAND $<TARGET_FILE:hourglass> completion zsh > ${HOURGLASS_ZSH_COMPLETION}
                   DEPENDS hourglass VERBATIM)
add_custom_target(hourglass_completion ALL
                  DEPENDS ${HOURGLASS_COMPLETION} ${HOURGLASS_ZSH_COMPLETION})
install(FILES ${HOURGLASS_COMPLETION}
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT cli)
install(FILES ${HOURGLASS_ZSH_COMPLETION}
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions COMPONENT cli)

# The library: each layer exported as hourglass::<layer>, hourglass_all as hourglass::hourglass.
foreach(target ${HOURGLASS_LAYER_TARGETS})
  string(REPLACE "hourglass_" "" layer ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer})
endforeach()
set_target_properties(hourglass_all PROPERTIES EXPORT_NAME hourglass)
install(TARGETS ${HOURGLASS_LAYER_TARGETS} hourglass_all EXPORT hourglassTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/hourglass DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
install(EXPORT hourglassTargets NAMESPACE hourglass::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hourglass COMPONENT dev)
# What the exported static libraries link, for the package config to find again: the GPU
# libraries found by path (cuDNN, NCCL) are recorded as those paths.
set(HOURGLASS_PACKAGE_USES_MPI ${MPI_CXX_FOUND})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hourglassConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/hourglassConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hourglass)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hourglassConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hourglassConfig.cmake
              ${PROJECT_BINARY_DIR}/hourglassConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hourglass COMPONENT dev)

# Debian packages. The runtime dependencies are Debian 12's packages of the libraries the
# command loads (what scripts/install-deps.sh installs for building, without -dev); a GPU
# build's CUDA or ROCm libraries come from the vendor's packages and are not named.
set(CPACK_PACKAGE_NAME hourglass)
set(CPACK_PACKAGE_VENDOR "hourglass")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "deep-learning training engine and command-line tool for a fixed compute budget")
set(CPACK_PACKAGE_CONTACT "hourglass developers <hourglass@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME hourglass)
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS
    "libdnnl2, libfmt9, libspdlog1.10, libtomlplusplus3, libarchive13, libpng16-16, libjpeg62-turbo, zlib1g, libgomp1")
if(HOURGLASS_HAS_ONNX)
  string(APPEND CPACK_DEBIAN_CLI_PACKAGE_DEPENDS ", libonnx1, libprotobuf32")
endif()
if(MPI_CXX_FOUND)
  string(APPEND CPACK_DEBIAN_CLI_PACKAGE_DEPENDS ", libopenmpi3")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_NAME hourglass-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libdnnl-dev, libfmt-dev, libspdlog-dev, libtomlplusplus-dev, nlohmann-json3-dev, libarchive-dev, libpng-dev, libjpeg62-turbo-dev, zlib1g-dev, ocl-icd-opencl-dev, cmake (>= 3.25)")
if(MPI_CXX_FOUND)
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", libopenmpi-dev")
endif()
set(CPACK_COMPONENT_CLI_DESCRIPTION "the hourglass command, its bash completion and example configs")
set(CPACK_COMPONENT_DEV_DESCRIPTION "hourglass's static libraries, headers and CMake package")
include(CPack)
