#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test run: installs the dependencies, checks the formatting,
# builds hourglass with its tests and benchmarks, runs the whole suite through CTest, and runs
# the CPU suite again under AddressSanitizer and UndefinedBehaviorSanitizer, then fuzzes each file
# reader for a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's start, in seconds from here: the landing allows the whole run 5,400.
start=$(date +%s)
stage() { echo "test.sh: $1 at $(($(date +%s) - start)) s"; }
stage install
bash scripts/install-deps.sh
# The tree's formatting (.clang-format), before the build so that a misformatted file fails fast.
stage format
bash scripts/check-format.sh
# HOURGLASS_REQUIRE_CHROMIUM: the report's browser test fails rather than being left out when
# chromium is missing (install-deps installs it).
stage build
bash scripts/build.sh -DHOURGLASS_BUILD_TESTS=ON -DHOURGLASS_BUILD_BENCH=ON -DHOURGLASS_REQUIRE_CHROMIUM=ON
# The GPU backend compiled for AMD GPUs (HIP) as well: the CUDA build above covers NVIDIA.
stage hip-check
bash scripts/hip-check.sh
stage ctest
(
  cd build
  # One test at a time: each uses both cores through the OpenMP pool.
  ctest --output-on-failure --timeout 900
)
# The CPU suite again under AddressSanitizer and UndefinedBehaviorSanitizer.
stage sanitize
bash scripts/sanitize-check.sh
# Each libFuzzer target (safetensors, IDX, CIFAR-10, config, ledger, ...) for 60 s from its
# seeds, with a fixed random seed so that the run is repeatable, two at a time (one per core).
stage fuzz
bash scripts/fuzz.sh -t 60 -s 1 -j 2
stage done
