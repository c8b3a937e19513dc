#!/usr/bin/env bash
# Configures and builds hourglass into build/ (Release). Extra arguments go to cmake; with
# --target NAME... (after them) only those targets are built.
# Compilers run through ccache when it is installed (cache in ~/.cache/ccache).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake_args=()
targets=()
while [ $# -gt 0 ]; do
  if [ "$1" = --target ]; then
    shift
    targets=("$@")
    break
  fi
  cmake_args+=("$1")
  shift
done
if command -v ccache >/dev/null; then
  cmake_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache
    "${cmake_args[@]}")
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-time_macros,include_file_mtime,include_file_ctime}
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}" >/dev/null
ninja -C build "${targets[@]}"
