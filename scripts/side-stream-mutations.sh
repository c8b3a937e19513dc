#!/usr/bin/env bash
# Runs on the GPU machine after `scripts/gpu-check.sh build`: shows that
# tests/train/test_gpu_side_stream.cpp catches each way the side stream's safety rules can be
# broken. Each mutation edits one line of the source, rebuilds the test, runs it (it must fail),
# and restores the line:
#   nowait      the main stream never waits for side pieces (SideStream::retire)
#   noreadwait  the tape reads deferred gradients without waiting (ops::wait_for_gradient)
#   nokeep      a piece keeps neither dy, x nor dw alive (only its workspace)
# Logs go to OUT (or build-device/logs); prints one line per mutation and the unmutated run.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
out=${OUT:-build-device/logs}
t=test_train_gpu_side_stream
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run() { ./build-device/tests/$t > "$out/side-$1.log" 2>&1; echo $?; }
mutate() {  # NAME FILE SED
  local name=$1 file=$2 expr=$3
  cp "$file" "$scratch/$name.orig"
  sed -i "$expr" "$file"
  if cmp -s "$file" "$scratch/$name.orig"; then echo "| $name | did not apply |"; return; fi
  if cmake --build build-device --target $t > "$out/side-$name-build.log" 2>&1; then
    local rc; rc=$(run "$name")
    echo "| $name | rc $rc, $(grep -c '^\[  FAILED  \]' "$out/side-$name.log") failed lines |"
  else
    echo "| $name | build failed |"
  fi
  cp "$scratch/$name.orig" "$file"
}
echo "| mutation | test result |"
echo "| --- | --- |"
echo "| none | rc $(run none) |"
mutate nowait src/hourglass/backend/gpu/side_stream.cpp '/gpuStreamWaitEvent(stream(index_)/d'
mutate noreadwait src/hourglass/ops/deferred_gradients.cpp \
  's/if (is_deferred_gradient(t)) join_deferred_gradients();/(void)t;/'
mutate nokeep src/hourglass/backend/gpu/conv2d.cpp \
  's/std::vector<Tensor> keep{dy, x, dw};/std::vector<Tensor> keep;/'
cmake --build build-device --target $t > /dev/null 2>&1
