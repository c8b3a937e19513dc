#!/usr/bin/env bash
# Side-by-side CPU training throughput: hourglass and Debian's PyTorch (python3-torch, run by
# /usr/bin/python3) on the same model, batch and thread count, in one run; prints the ratio.
# Usage: bench/cpu_vs_pytorch.sh [steps]     (needs build/hourglass and python3-torch)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
threads=$(nproc)
hg=./build/hourglass
run_pair() {   # label, hourglass args, torch args
  local label=$1 hg_args=$2 torch_args=$3
  local h t
  h=$($hg bench $hg_args --steps "$steps" --warmup 3 --threads "$threads" --json)
  t=$(/usr/bin/python3 bench/torch_cpu.py $torch_args --steps "$steps" --warmup 3 --threads "$threads" --json)
  /usr/bin/python3 - "$label" "$h" "$t" <<'PY'
import json, sys
label, h, t = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
ht, tt = h["train_images_per_s"], t["train_images_per_s"]
he, te = h["eval_images_per_s"], t["eval_images_per_s"]
print(f"| {label} | {ht:.1f} | {tt:.1f} | {ht/tt:.2f}x | {he:.1f} | {te:.1f} | {he/te:.2f}x |")
PY
}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads; torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
echo "| workload | hourglass train img/s | PyTorch train img/s | ratio | hourglass eval img/s | PyTorch eval img/s | ratio |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
run_pair "CIFAR ResNet-18, batch 64, fp32" "resnet18-cifar --batch 64" "--model resnet18-cifar --batch 64"
run_pair "small CNN 28x28x1, batch 128, fp32" "small-cnn --batch 128 --in-channels 1 --size 28" \
  "--model small-cnn --batch 128 --in-channels 1 --size 28"
