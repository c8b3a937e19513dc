#!/usr/bin/env bash
# Configures and builds hourglass into build/ (Release). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
# Two compile jobs per core at most: the library's oneDNN-heavy files take ~1 GiB each.
ninja -C build
