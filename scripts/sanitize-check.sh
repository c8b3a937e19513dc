#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer: configures a CPU-only
# build with -DHOURGLASS_SANITIZE=ON into build-sanitize/ and runs every test there through
# CTest. Any finding aborts the test that hit it (-fno-sanitize-recover), so a clean run is a
# clean report. Extra arguments go to ctest (e.g. -R Safetensors).
#
# Built at -O1 (ASan's recommended level): the instrumented -O3 build took 2.4 times the main
# build's compile time, -O1 cuts each file's compile by about a third. The tests run two at a
# time with one OpenMP thread each: the threaded code paths run in the main suite, and here
# the point is every byte each test touches.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DHOURGLASS_GPU=off \
  -DHOURGLASS_SANITIZE=ON -DHOURGLASS_BUILD_TESTS=ON -DHOURGLASS_BUILD_BENCH=OFF >/dev/null
ninja -C build-sanitize
cd build-sanitize
# Leaks are reported too (LeakSanitizer comes with ASan); stacks are symbolized.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ctest --output-on-failure --timeout 900 -j 2 "$@"
