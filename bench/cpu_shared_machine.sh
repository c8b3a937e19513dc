#!/usr/bin/env bash
# CPU training on a shared machine: the quickstart's epoch (configs/quickstart.toml, one epoch,
# images/s from metrics.jsonl) and the small CNN's training step beside Debian's PyTorch
# (`hourglass bench small-cnn` and bench/torch_cpu.py, batch 128, 28x28x1), each on an idle
# machine and under a competing load of LOAD busy processes (default 2: one per core of the CI
# machine kind), with the default thread count (every core) and with one thread; and hourglass
# with every core once more under libgomp's own default wait (GOMP_SPINCOUNT=300000, the wait
# before the hourglass command chose 3000), for the comparison in the same run.
#
#   bench/cpu_shared_machine.sh [HOURGLASS] [OUT] [LOAD]     (needs python3-torch for PyTorch's rows)
#
# The load is `sh -c 'while :; do :; done'`, started before and stopped after each measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
hg=${1:-./build/hourglass}
out=${2:-$(mktemp -d /tmp/cpu-shared.XXXXXX)}
load=${3:-2}
steps=${STEPS:-60}
mkdir -p "$out"
cores=$(nproc)
pids=()
load_on() {
  local i
  for ((i = 0; i < load; i++)); do
    sh -c 'while :; do :; done' &
    pids+=($!)
  done
  sleep 1
}
load_off() {
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
trap load_off EXIT

epoch_rate() {  # threads -> the quickstart epoch's images/s
  local dir="$out/quickstart-t$1-$RANDOM"
  env ${spin:+GOMP_SPINCOUNT=$spin} "$hg" train configs/quickstart.toml --run-dir "$dir" --set train.epochs=1 \
    --set "threads=$1" --json >"$dir.json" 2>"$dir.log"
  python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["last_epoch"]["images_per_s"]))' "$dir.json"
}
bench_rate() {  # threads -> hourglass bench's training images/s
  env ${spin:+GOMP_SPINCOUNT=$spin} "$hg" bench small-cnn --batch 128 --in-channels 1 --size 28 --steps "$steps" --warmup 5 \
    --threads "$1" --json 2>>"$out/bench.log" |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["train_images_per_s"]))'
}
torch_rate() {  # threads -> PyTorch's training images/s, or "-" without python3-torch
  if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then echo -; return; fi
  /usr/bin/python3 bench/torch_cpu.py --model small-cnn --batch 128 --in-channels 1 --size 28 \
    --steps "$steps" --warmup 5 --threads "$1" --json 2>>"$out/torch.log" |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["train_images_per_s"]))'
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $cores cores; load: $load busy processes"
echo "| condition | threads | OpenMP wait | quickstart epoch img/s | hourglass step img/s | PyTorch step img/s |"
echo "| --- | --- | --- | --- | --- | --- |"
for condition in idle loaded; do
  for run in "$cores" 1 "$cores:300000"; do
    threads=${run%%:*}
    spin=""
    [ "$run" = "$threads" ] || spin=${run#*:}
    [ "$condition" = idle ] || load_on
    e=$(epoch_rate "$threads")
    b=$(bench_rate "$threads")
    t=-
    [ -n "$spin" ] || t=$(torch_rate "$threads")
    load_off
    echo "| $condition | $threads | ${spin:-3000 (default)} | $e | $b | $t |"
  done
done
echo "logs: $out"
