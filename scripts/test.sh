#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test run: installs the dependencies, checks the formatting,
# builds hourglass with its tests and benchmarks, compiles the GPU tree for AMD GPUs, runs the
# whole suite through CTest, then builds the CPU suite again with clang under AddressSanitizer
# and UndefinedBehaviorSanitizer, runs it, and fuzzes each file reader for a minute in that same
# build. Prints each stage's seconds at the end.
#
# Stages that need something outside this repository say so in one line and are skipped:
# hip-check needs ROCm 6 headers (HOURGLASS_ROCM_INCLUDE, $ROCM_PATH/include, /opt/rocm/include
# or ../shared/rocm-6.2/include beside this clone); hip-check-rocm7 needs them too, with ROCm 7's
# HIP and RCCL headers (HOURGLASS_ROCM7_PATH or ../shared/rocm-7.0) and clang++-19. Under CI
# (CI=true) they are required.
# Compilers run through ccache (its cache in ~/.cache/ccache), so a second run is faster.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
stages=()
current=""
current_start=$start
stage() {
  local now
  now=$(date +%s)
  if [ -n "$current" ]; then stages+=("$current $((now - current_start))"); fi
  current=$1
  current_start=$now
  [ "$current" = done ] || echo "test.sh: $current at $((now - start)) s"
}
table() {
  local rc=$?
  [ "$current" = done ] || stage "${current:-start}(stopped,exit-$rc)"
  echo
  printf 'test.sh: %-28s %7s\n' stage seconds
  for s in "${stages[@]}"; do printf 'test.sh: %-28s %7s\n' "${s% *}" "${s##* }"; done
  printf 'test.sh: %-28s %7s\n' total $(($(date +%s) - start))
}
trap table EXIT
skipped=()
skip() {
  echo "test.sh: SKIPPED $1" >&2
  skipped+=("$1")
}

stage install
bash scripts/install-deps.sh --test
# The tree's formatting (.clang-format), before the build so that a misformatted file fails fast.
stage format
bash scripts/check-format.sh

rocm_include=$(bash scripts/hip-check.sh --find-headers || true)
stage build
# HOURGLASS_REQUIRE_CHROMIUM: the report's browser test fails rather than being left out when
# chromium is missing (install-deps installs it).
build_flags=(-DHOURGLASS_BUILD_TESTS=ON -DHOURGLASS_BUILD_BENCH=ON -DHOURGLASS_REQUIRE_CHROMIUM=ON)
[ -z "$rocm_include" ] || build_flags+=(-DHOURGLASS_ROCM_INCLUDE="$rocm_include")
bash scripts/build.sh "${build_flags[@]}"

# The GPU backend compiled for AMD GPUs (HIP) as well, against ROCm 6 (Debian's hipcc) and
# ROCm 7 (clang-19): the CUDA build above covers NVIDIA.
stage hip-check
if [ -n "$rocm_include" ]; then
  HOURGLASS_ROCM_INCLUDE=$rocm_include bash scripts/hip-check.sh --tree rocm6
elif [ "${CI:-}" = true ]; then
  echo "test.sh: hip-check needs ROCm 6 headers under CI (../shared/rocm-6.2/include)" >&2
  exit 1
else
  skip "hip-check: no ROCm 6 headers (set ROCM_PATH or HOURGLASS_ROCM_INCLUDE to a ROCm 6 install, or put ROCm 6.2's include folder at ../shared/rocm-6.2/include)"
fi
stage hip-check-rocm7
if [ -n "$rocm_include" ] && bash scripts/hip-check.sh --find-rocm7 >/dev/null &&
    command -v clang++-19 >/dev/null; then
  HOURGLASS_ROCM_INCLUDE=$rocm_include bash scripts/hip-check.sh --tree rocm7
elif [ "${CI:-}" = true ]; then
  echo "test.sh: hip-check-rocm7 needs ../shared/rocm-7.0, ROCm 6 headers and clang++-19 under" \
    "CI (scripts/install-deps.sh --test installs clang-19)" >&2
  exit 1
else
  skip "hip-check-rocm7: needs ROCm 7's HIP and RCCL headers (HOURGLASS_ROCM7_PATH or ../shared/rocm-7.0), ROCm 6 headers for MIOpen and hipBLASLt, and clang++-19 (apt-get install clang-19)"
fi

stage ctest
(
  cd build
  # One test per core. Most take a tenth of a second, mostly process start; the threaded ones
  # share the cores through OpenMP pools that spin briefly and then sleep (GOMP_SPINCOUNT, as
  # the hourglass command sets it): 114 s against 184 s one at a time on two cores.
  GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-3000} ctest --output-on-failure --timeout 900 -j "$(nproc)"
)
# The CPU suite again under AddressSanitizer and UndefinedBehaviorSanitizer (clang), in the
# build that also holds the libFuzzer targets.
stage sanitize-build
bash scripts/sanitize-check.sh --build-only
stage sanitize-ctest
bash scripts/sanitize-check.sh --test-only
# Each libFuzzer target (safetensors, IDX, CIFAR-10, config, ledger, ...) for 60 s from its
# seeds, with a fixed random seed so that the run is repeatable, two at a time (one per core).
stage fuzz
bash scripts/fuzz.sh -t 60 -s 1 -j 2 -b build-sanitize
stage done
if [ ${#skipped[@]} -gt 0 ]; then
  echo "test.sh: passed, with ${#skipped[@]} stage(s) skipped:"
  printf 'test.sh:   %s\n' "${skipped[@]}"
fi
