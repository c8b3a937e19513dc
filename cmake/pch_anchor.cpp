// The one source file of hourglass_pch (src/CMakeLists.txt), the target that builds the layers'
// precompiled headers (cmake/pch.cmake): it defines nothing.
