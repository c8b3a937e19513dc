#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer: configures a CPU-only
# build with -DHOURGLASS_SANITIZE=ON into build-sanitize/ and runs every test there through
# CTest. Any finding aborts the test that hit it (-fno-sanitize-recover), so a clean run is a
# clean report. Extra arguments go to ctest (e.g. -R Safetensors).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOURGLASS_GPU=off \
  -DHOURGLASS_SANITIZE=ON -DHOURGLASS_BUILD_TESTS=ON -DHOURGLASS_BUILD_BENCH=OFF >/dev/null
ninja -C build-sanitize
cd build-sanitize
# Leaks are reported too (LeakSanitizer comes with ASan); stacks are symbolized.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --output-on-failure --timeout 900 "$@"
