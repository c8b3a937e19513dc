#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer: configures a CPU-only
# clang build with -DHOURGLASS_FUZZ=ON (the sanitizers, plus libFuzzer's coverage
# instrumentation) into build-sanitize/, builds the tests and the libFuzzer targets there, and
# runs every test through CTest. One build serves both: scripts/fuzz.sh -b build-sanitize runs
# the fuzzers from it. Any finding aborts the test that hit it (-fno-sanitize-recover), so a
# clean run is a clean report.
#
#   scripts/sanitize-check.sh [--build-only | --test-only] [CTEST ARGS...]   (e.g. -R Safetensors)
#
# Built at -O1 (ASan's and libFuzzer's recommended level): the instrumented -O3 build took 2.4
# times the main build's compile time, -O1 cuts each file's compile by about a third. The tests
# run two at a time with one OpenMP thread each: the threaded code paths run in the main suite,
# and here the point is every byte each test touches.
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
test=1
case "${1:-}" in
  --build-only) test=0; shift ;;
  --test-only) build=0; shift ;;
esac
if [ $build = 1 ]; then
  extra=()
  if command -v ccache >/dev/null; then extra=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  # ROCm 6 headers, where there are any, for the MIOpen wrapper's test against a fake library.
  if rocm_include=$(bash scripts/hip-check.sh --find-headers); then
    extra+=(-DHOURGLASS_ROCM_INCLUDE="$rocm_include")
  fi
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=clang++ "${extra[@]}" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DHOURGLASS_GPU=off -DHOURGLASS_FUZZ=ON -DHOURGLASS_BUILD_TESTS=ON \
    -DHOURGLASS_BUILD_BENCH=OFF >/dev/null
  ninja -C build-sanitize
fi
if [ $test = 1 ]; then
  cd build-sanitize
  # Leaks are reported too (LeakSanitizer comes with ASan); stacks are symbolized.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/../tests/sanitizer/lsan.supp}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  ctest --output-on-failure --timeout 900 -j 2 "$@"
fi
