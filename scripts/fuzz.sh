#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with AddressSanitizer and UndefinedBehaviorSanitizer)
# into build-fuzz/ and runs each for a bounded time, starting from its seed corpus in
# fuzz/corpus/<target>/. Any finding (crash, sanitizer report, hang over 10 s, memory over
# 2 GiB, failed check) fails the script; the input that caused it is left in
# build-fuzz/findings/ with the reproducer command printed.
#
#   scripts/fuzz.sh [-t SECONDS] [-j JOBS] [-s SEED] [-b BUILD_DIR] [TARGET...]
#     -t  seconds per target (default 60; CI's run)     -j  targets run at once (default 1)
#     -s  libFuzzer's random seed (default: a new one each run). CI passes one, so that its run
#         is repeatable: the same code explores the same inputs, a slower machine a prefix of them
#     -b  the build folder (default build-fuzz, configured here). scripts/test.sh passes
#         build-sanitize, which scripts/sanitize-check.sh configured with -DHOURGLASS_FUZZ=ON
#     TARGET: safetensors idx cifar10 cifar10_pickle cifar10_archive cifar10_gzip config ledger
#       image_pack image_folder run_dir (default: all)
# e.g. an hour each, all eleven at once:  scripts/fuzz.sh -t 3600 -j 11
# The corpus each run grows is kept in build-fuzz/corpus/<target>/, so a later run goes on
# from it; fuzz/corpus/ (the committed seeds) is never written.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
jobs=1
seed=0
build=build-fuzz
while getopts "t:j:s:b:" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    s) seed=$OPTARG ;;
    b) build=$OPTARG ;;
    *) echo "usage: scripts/fuzz.sh [-t SECONDS] [-j JOBS] [-s SEED] [-b BUILD_DIR] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(safetensors idx cifar10 cifar10_pickle cifar10_archive cifar10_gzip config ledger
  image_pack image_folder run_dir); fi
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/fuzz_$t.cpp" ]; then
    echo "fuzz.sh: no target '$t' (fuzz/fuzz_$t.cpp); targets: safetensors idx cifar10 cifar10_pickle" \
      "cifar10_archive cifar10_gzip config ledger image_pack image_folder run_dir" >&2
    exit 2
  fi
done

if [ "$build" = build-fuzz ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DHOURGLASS_GPU=off -DHOURGLASS_FUZZ=ON \
    -DHOURGLASS_BUILD_TESTS=OFF -DHOURGLASS_BUILD_BENCH=OFF >/dev/null
elif ! grep -q '^HOURGLASS_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz.sh: $build is not a build configured with -DHOURGLASS_FUZZ=ON" \
    "(scripts/sanitize-check.sh makes build-sanitize so)" >&2
  exit 2
fi
ninja -C "$build" "${targets[@]/#/fuzz_}"
mkdir -p "$build/findings" "$build/logs"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run_one() {
  local t=$1
  mkdir -p "$build/corpus/$t"
  # One worker thread for the readers' OpenMP pool: the fuzzer measures the reader, not the pool.
  if OMP_NUM_THREADS=1 "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -seed="$seed" -print_final_stats=1 -artifact_prefix="$build/findings/$t-" \
      "$build/corpus/$t" "fuzz/corpus/$t" >"$build/logs/$t.log" 2>&1; then
    echo "fuzz $t: clean, $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' \
      "$build/logs/$t.log" | grep -o '[0-9]*$') inputs in ${seconds}s"
  else
    echo "fuzz $t: FINDING (log: $build/logs/$t.log)" >&2
    grep -m1 -A12 "ERROR\|fuzz check failed\|Test unit written" "$build/logs/$t.log" >&2 || true
    echo "reproduce: $build/fuzz/fuzz_$t $build/findings/$t-<crash file>" >&2
    return 1
  fi
}

failed=0
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit $failed
