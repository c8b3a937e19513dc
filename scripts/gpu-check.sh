#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool, with .deb carried): unpacks the carried
# libraries, builds hourglass, runs the test suite and the benchmarks, and prints a short
# table last. Logs go to $OUT (or build-device/ when OUT is unset).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build-device/out}
mkdir -p "$out"
source scripts/device-env.sh
{
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  nproc; g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1
} > "$out/machine.txt" 2>&1
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOURGLASS_GPU="${HOURGLASS_GPU:-auto}" \
  > "$out/configure.log" 2>&1
configure_rc=$?
ninja -C build-device > "$out/build.log" 2>&1
build_rc=$?
(cd build-device && ctest --timeout 900 -j 4 > "$out/ctest.log" 2>&1)
test_rc=$?
./build-device/hourglass info > "$out/info.txt" 2>&1
./build-device/hourglass bench resnet18-cifar --batch 64 --steps 5 --warmup 2 --threads 16 > "$out/bench.txt" 2>&1
cat "$out/machine.txt"
echo "| step | exit | detail |"
echo "| --- | --- | --- |"
echo "| configure | $configure_rc | $(tail -1 "$out/configure.log") |"
echo "| build | $build_rc | $(grep -c FAILED "$out/build.log") failed targets |"
echo "| ctest | $test_rc | $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1) |"
echo "| info | | $(tr '\n' ' ' < "$out/info.txt" | cut -c1-150) |"
echo "| bench | | $(cat "$out/bench.txt" | tail -1) |"
[ "$build_rc" = 0 ] || grep -B2 -A8 "FAILED" "$out/build.log" | head -60
